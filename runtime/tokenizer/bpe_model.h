// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}): vocab, merges (as "a b" strings
// or [a, b] pairs), unk_token, fuse_unk, byte_fallback (<0xNN> tokens), ignore_merges,
// continuing_subword_prefix and end_of_word_suffix. Encoding a word merges its lowest-ranked
// adjacent pair first (leftmost on ties) with a heap over a linked list of symbols, O(n log n) per
// word, and caches each distinct word. A long word (SentencePiece-style tokenizers have no
// pre-tokenizer: all text between added tokens is one word) is first cut where no merge can ever
// join the two sides: between two characters that are vocab tokens themselves and that no vocab
// token holds next to each other. `dropout` is ignored: encoding is deterministic.
// Immutable after FromJson apart from the internal cache; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "runtime/tokenizer/json_fields.h"
#include "runtime/tokenizer/word_cache.h"

namespace baton::runtime {

class BpeModel {
 public:
  // `model` is tokenizer.json's "model" object, at path `at`. InvalidArgument for a malformed vocab
  // or a merge whose parts or result are not in the vocab.
  static absl::StatusOr<std::unique_ptr<BpeModel>> FromJson(const nlohmann::json& model,
                                                            const JsonPath& at);

  // Appends the ids of one pre-tokenized word (valid UTF-8) to *ids. Characters that are not in
  // the vocab become their <0xNN> byte tokens (byte_fallback), else unk_token (fused when
  // fuse_unk), else they are dropped.
  void Tokenize(std::string_view word, std::vector<int32_t>* ids) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  // nullptr when no token has this id.
  const std::string* IdToToken(int32_t id) const;
  // One past the largest id in the vocab.
  int32_t id_limit() const { return static_cast<int32_t>(id_to_token_.size()); }

 private:
  struct Merge {
    uint32_t rank;   // position in the merges list: lower merges first
    int32_t new_id;  // the id of the merged token
  };

  BpeModel() : cache_(kCacheCapacity) {}

  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  absl::Status LoadMerges(const nlohmann::json& merges, const JsonPath& at);
  // The ids of `word`'s characters before any merge, with byte fallback and unk handling.
  void InitialSymbols(std::string_view word, std::vector<int32_t>* symbol_ids) const;
  void MergeWord(std::string_view word, std::vector<int32_t>* ids) const;
  // MergeWord through the cache.
  void TokenizePiece(std::string_view piece, std::vector<int32_t>* ids) const;
  static uint64_t CharPairKey(char32_t left, char32_t right) {
    return (static_cast<uint64_t>(left) << 32) | right;
  }

  // Ids index dense tables: a vocab with larger ids is rejected (real vocabs stay below 10^6).
  static constexpr int64_t kMaxTokenId = int64_t{1} << 24;
  static constexpr size_t kCacheCapacity = 1 << 16;
  static constexpr size_t kMaxCachedWordBytes = 256;
  static constexpr size_t kMinCutWordBytes = 64;  // shorter words are merged whole

  absl::flat_hash_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;  // [id_limit]; "" where has_id_ is false
  std::vector<bool> has_id_;              // [id_limit]
  absl::flat_hash_map<uint64_t, Merge> merges_;  // keyed by PairKey(left id, right id)
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  std::array<int32_t, 256> byte_token_ids_;  // id of "<0xNN>" per byte, -1 when absent
  // Every pair of adjacent characters inside a vocab token, keyed by CharPairKey.
  absl::flat_hash_set<uint64_t> vocab_char_pairs_;
  bool can_cut_words_ = false;  // no prefix/suffix affixes: symbols spell their characters
  mutable WordCache cache_;
};

}  // namespace baton::runtime
