#include "runtime/tokenizer/word_cache.h"

#include "absl/hash/hash.h"
#include "runtime/tokenizer/absl_compat.h"

namespace baton::runtime {

WordCache::WordCache(size_t capacity)
    : capacity_per_shard_((capacity + kNumShards - 1) / kNumShards) {}

WordCache::Shard& WordCache::ShardFor(std::string_view word) const {
  const size_t hash = absl::Hash<absl::string_view>{}(ToAbsl(word));
  // High bits: the maps inside a shard use the low bits of the same hash.
  return shards_[(hash >> 48) % kNumShards];
}

bool WordCache::Lookup(std::string_view word, std::vector<int32_t>* ids) const {
  Shard& shard = ShardFor(word);
  std::lock_guard<std::mutex> lock(shard.mu);
  const auto it = shard.map.find(ToAbsl(word));
  if (it == shard.map.end()) return false;
  ids->insert(ids->end(), it->second.begin(), it->second.end());
  return true;
}

void WordCache::Insert(std::string_view word, std::span<const int32_t> ids) {
  Shard& shard = ShardFor(word);
  std::lock_guard<std::mutex> lock(shard.mu);
  if (shard.map.size() >= capacity_per_shard_) return;
  shard.map.try_emplace(std::string(word), ids.begin(), ids.end());
}

}  // namespace baton::runtime
