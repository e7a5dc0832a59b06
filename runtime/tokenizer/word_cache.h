// A bounded, thread-safe map from a pre-tokenized word to its token ids, so that the BPE merge loop
// runs once per distinct word. Sharded by hash, one mutex per shard; when a shard is full new words
// are simply not cached (the tokenizers library does the same), so memory stays bounded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace baton::runtime {

class WordCache {
 public:
  // capacity: the maximum number of cached words over all shards.
  explicit WordCache(size_t capacity);

  // Appends the cached ids of `word` to *ids and returns true, or returns false on a miss.
  bool Lookup(std::string_view word, std::vector<int32_t>* ids) const;

  // Caches `ids` for `word` unless the word's shard is full.
  void Insert(std::string_view word, std::span<const int32_t> ids);

 private:
  static constexpr size_t kNumShards = 32;
  struct Shard {
    mutable std::mutex mu;
    absl::flat_hash_map<std::string, std::vector<int32_t>> map;  // guarded by mu
  };

  Shard& ShardFor(std::string_view word) const;

  size_t capacity_per_shard_;
  mutable Shard shards_[kNumShards];
};

}  // namespace baton::runtime
