// The "decoder" of tokenizer.json: turns token strings back into text, as `tokenizers` does with
// decode_chain. Supported: Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace.
// Without a decoder, tokens are joined with spaces. Others (WordPiece, CTC, ...) are Unimplemented.
// Immutable after FromJson; thread-safe.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "runtime/tokenizer/decoded_text.h"
#include "runtime/tokenizer/json_fields.h"
#include "runtime/tokenizer/pattern.h"

namespace baton::runtime {

class Decoder {
 public:
  // A null `json` joins tokens with " ".
  static absl::StatusOr<Decoder> FromJson(const nlohmann::json& json, const JsonPath& at);

  DecodedText Decode(std::vector<std::string> tokens) const;

 private:
  struct ByteLevel {};
  struct ByteFallback {};
  struct Fuse {};
  struct Strip {
    std::string content;  // one character
    size_t start;         // at most this many leading `content` characters are removed
    size_t stop;          // at most this many trailing ones
  };
  struct Metaspace {
    std::string replacement;
    bool strip_first;  // prepend_scheme != never: the first token loses its replacement chars
  };
  using Step = std::variant<ByteLevel, ReplaceStep, ByteFallback, Fuse, Strip, Metaspace>;

  static absl::Status AppendSteps(const nlohmann::json& json, const JsonPath& at,
                                  std::vector<Step>* steps);

  bool has_decoder_ = false;
  std::vector<Step> steps_;
};

}  // namespace baton::runtime
