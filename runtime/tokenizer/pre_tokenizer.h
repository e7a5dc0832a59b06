// The "pre_tokenizer" of tokenizer.json: splits each normalized stretch of input into the words the
// BPE model encodes one at a time. Supported: Sequence, Split (String or Regex pattern, the five
// behaviors, invert), ByteLevel (GPT-2 regex, add_prefix_space, byte-to-unicode mapping), Metaspace
// (replacement, prepend_scheme always/first/never or the older add_prefix_space, split), Digits,
// WhitespaceSplit. Others are Unimplemented. Immutable after FromJson; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "runtime/tokenizer/json_fields.h"
#include "runtime/tokenizer/pattern.h"

namespace baton::runtime {

// One piece of text between pre-tokenization steps.
struct PreTokenPiece {
  std::string text;
  bool at_origin;  // starts at offset 0 of the original input (Metaspace's "first" scheme)
};

class PreTokenizer {
 public:
  // A null `json` gives the identity pre-tokenizer (the whole stretch is one word).
  static absl::StatusOr<PreTokenizer> FromJson(const nlohmann::json& json, const JsonPath& at);

  // Splits `text` (valid UTF-8, normalized) into words and appends the non-empty ones to *words.
  void Apply(std::string_view text, bool at_origin, std::vector<std::string>* words) const;

 private:
  struct Split {
    Pattern pattern;
    SplitBehavior behavior;
    bool invert;
  };
  struct ByteLevel {
    bool add_prefix_space;
    bool use_regex;
  };
  enum class PrependScheme { kAlways, kFirst, kNever };
  struct Metaspace {
    std::string replacement;  // one character, usually U+2581
    PrependScheme prepend_scheme;
    bool split;
  };
  using Step = std::variant<Split, ByteLevel, Metaspace>;

  static absl::Status AppendSteps(const nlohmann::json& json, const JsonPath& at,
                                  std::vector<Step>* steps);
  static void ApplyStep(const Step& step, std::vector<PreTokenPiece>& pieces,
                        std::vector<PreTokenPiece>* out);

  std::vector<Step> steps_;
};

}  // namespace baton::runtime
