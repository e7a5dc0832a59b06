// The "normalizer" of tokenizer.json: a sequence of text rewrites applied to each stretch of input
// between added tokens, before pre-tokenization. Supported: Sequence, Prepend, Replace, NFC, NFD,
// NFKC, NFKD, Lowercase, Strip. Others (BertNormalizer, Precompiled, ...) are Unimplemented.
// Immutable after FromJson; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "runtime/tokenizer/json_fields.h"
#include "runtime/tokenizer/pattern.h"
#include "runtime/tokenizer/unicode.h"

namespace baton::runtime {

class Normalizer {
 public:
  // A null `json` gives the identity normalizer.
  static absl::StatusOr<Normalizer> FromJson(const nlohmann::json& json, const JsonPath& at);

  bool is_identity() const { return steps_.empty(); }

  // Pre-condition: `text` is valid UTF-8. The result is valid UTF-8.
  std::string Apply(std::string_view text) const;

 private:
  struct Prepend {
    std::string prefix;  // prepended to non-empty text only
  };
  struct UnicodeForm {
    unicode::NormalizationForm form;
  };
  struct Lowercase {};
  struct Strip {
    bool left;
    bool right;
  };
  using Step = std::variant<Prepend, ReplaceStep, UnicodeForm, Lowercase, Strip>;

  static absl::Status AppendSteps(const nlohmann::json& json, const JsonPath& at,
                                  std::vector<Step>* steps);

  std::vector<Step> steps_;
};

}  // namespace baton::runtime
