// The parts of transformers' tokenizer_config.json that serving needs: the BOS/EOS token names and
// the add_bos_token / add_eos_token switches. Everything else in the file is ignored.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace baton::runtime {

struct TokenizerConfig {
  std::optional<std::string> bos_token;  // "bos_token": a string or {"content": ...}; absent/null
  std::optional<std::string> eos_token;  // likewise "eos_token"
  std::optional<bool> add_bos_token;     // absent when the file does not say
  std::optional<bool> add_eos_token;
};

// Parses the text of a tokenizer_config.json. InvalidArgument naming `source` and the field for
// malformed JSON or a field of the wrong type.
absl::StatusOr<TokenizerConfig> ParseTokenizerConfig(std::string_view json_text,
                                                     std::string_view source);

}  // namespace baton::runtime
