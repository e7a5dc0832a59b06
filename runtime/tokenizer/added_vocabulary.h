// The "added_tokens" of tokenizer.json (special tokens such as <s> or <|begin_of_text|> and added
// regular tokens) and how the input is split on them before the model sees it, as `tokenizers`
// does: tokens with normalized=false are found in the raw text, those with normalized=true in the
// normalized text (their content normalized too). Matching is leftmost-longest and non-overlapping;
// single_word rejects a match next to a word character; lstrip/rstrip make the match swallow the
// whitespace on its left/right. Immutable after FromJson; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "runtime/tokenizer/json_fields.h"
#include "runtime/tokenizer/normalizer.h"

namespace baton::runtime {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  // What decoding starts from: `content`, or for normalized=true tokens `content` normalized (as
  // `tokenizers` >= 0.22 does, so that e.g. a Prepend("▁") normalizer's space comes back).
  std::string decode_text;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
};

// A stretch of text: an added token (added_id >= 0) or text to normalize/pre-tokenize (-1).
struct AddedSplit {
  size_t begin;  // byte offsets into the split text
  size_t end;
  int32_t added_id;
};

class AddedVocabulary {
 public:
  // `json` is the "added_tokens" array (or null). `normalizer` normalizes the content of the
  // normalized=true tokens. `model_id` gives the model vocab's id for a content, if any: like
  // `tokenizers`, a token the model already has keeps the model's id, whatever "id" says.
  static absl::StatusOr<AddedVocabulary> FromJson(
      const nlohmann::json& json, const Normalizer& normalizer,
      const std::function<std::optional<int32_t>(std::string_view)>& model_id,
      const JsonPath& at);

  // Splits raw input on the tokens with normalized=false. The splits cover `text` in order.
  std::vector<AddedSplit> SplitRaw(std::string_view text) const { return raw_.Split(text, *this); }
  // Splits normalized input on the tokens with normalized=true.
  std::vector<AddedSplit> SplitNormalized(std::string_view text) const {
    return normalized_.Split(text, *this);
  }

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  // nullptr when `id` is not an added token.
  const AddedToken* FindById(int32_t id) const;
  const AddedToken* FindByContent(std::string_view content) const;

 private:
  // A byte trie over the patterns of one token set, searched leftmost-longest.
  class Matcher {
   public:
    void Add(std::string_view pattern, size_t token_index);
    std::vector<AddedSplit> Split(std::string_view text, const AddedVocabulary& vocab) const;

   private:
    // The longest pattern starting at text[pos]: its length and token index, or length 0.
    std::pair<size_t, size_t> LongestAt(std::string_view text, size_t pos) const;

    struct Node {
      absl::flat_hash_map<uint8_t, int32_t> children;
      int64_t token_index = -1;  // a pattern ends here
    };
    std::vector<Node> nodes_{Node{}};
    bool first_byte_[256] = {};
  };

  std::vector<AddedToken> tokens_;
  absl::flat_hash_map<int32_t, size_t> index_by_id_;
  absl::flat_hash_map<std::string, size_t> index_by_content_;
  Matcher raw_;
  Matcher normalized_;
};

}  // namespace baton::runtime
