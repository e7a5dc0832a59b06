#include "runtime/kv_cache/block_allocator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/common/check.h"

namespace baton::runtime {

BlockAllocator::BlockAllocator(int num_blocks)
    : refcounts_(num_blocks, 0), cached_hash_(num_blocks), prev_(num_blocks + 1, num_blocks),
      next_(num_blocks + 1, num_blocks) {
  BATON_CHECK(num_blocks >= 0);
  free_list_.reserve(num_blocks);
  for (BlockId block = num_blocks - 1; block >= 0; --block) free_list_.push_back(block);
}

void BlockAllocator::LinkEvictable(BlockId block) {
  const BlockId sentinel = num_blocks();
  const BlockId tail = prev_[sentinel];
  next_[tail] = block;
  prev_[block] = tail;
  next_[block] = sentinel;
  prev_[sentinel] = block;
  ++num_evictable_;
}

void BlockAllocator::UnlinkEvictable(BlockId block) {
  next_[prev_[block]] = next_[block];
  prev_[next_[block]] = prev_[block];
  --num_evictable_;
}

absl::StatusOr<std::vector<BlockId>> BlockAllocator::Allocate(int n) {
  if (n < 0 || !CanAllocate(n)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("KV cache: ", n, " blocks requested, ", num_blocks_free(), " free"));
  }
  const int num_plain = std::min<int>(n, free_list_.size());
  std::vector<BlockId> blocks(free_list_.end() - num_plain, free_list_.end());
  std::reverse(blocks.begin(), blocks.end());
  free_list_.resize(free_list_.size() - num_plain);
  while (static_cast<int>(blocks.size()) < n) {  // evict, least recently released first
    const BlockId block = next_[num_blocks()];
    UnlinkEvictable(block);
    cached_.erase(*cached_hash_[block]);
    RecordEvent({.hash = *cached_hash_[block], .stored = false});
    cached_hash_[block].reset();
    blocks.push_back(block);
  }
  for (BlockId block : blocks) refcounts_[block] = 1;
  return blocks;
}

void BlockAllocator::IncRef(BlockId block) {
  BATON_CHECK(block >= 0 && block < num_blocks() && (refcounts_[block] > 0 || IsCached(block)));
  if (refcounts_[block]++ == 0) UnlinkEvictable(block);
}

void BlockAllocator::Release(BlockId block) {
  BATON_CHECK(block >= 0 && block < num_blocks() && refcounts_[block] > 0);
  if (--refcounts_[block] > 0) return;
  if (IsCached(block)) {
    LinkEvictable(block);
  } else {
    free_list_.push_back(block);
  }
}

void BlockAllocator::Release(const std::vector<BlockId>& blocks) {
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) Release(*it);
}

int BlockAllocator::refcount(BlockId block) const {
  BATON_CHECK(block >= 0 && block < num_blocks());
  return refcounts_[block];
}

bool BlockAllocator::Cache(BlockId block, BlockHash hash) {
  BATON_CHECK(block >= 0 && block < num_blocks() && refcounts_[block] > 0);
  if (IsCached(block) || !cached_.try_emplace(hash, block).second) return false;
  cached_hash_[block] = hash;
  RecordEvent({.hash = hash, .stored = true});
  return true;
}

std::vector<BlockHash> BlockAllocator::CachedHashes() const {
  std::vector<BlockHash> hashes;
  hashes.reserve(cached_.size());
  for (const auto& [hash, block] : cached_) hashes.push_back(hash);
  return hashes;
}

void BlockAllocator::RecordCacheEvents(int max_pending) { max_pending_events_ = max_pending; }

void BlockAllocator::RecordEvent(CacheEvent event) {
  if (max_pending_events_ == 0 || events_.reset) return;
  if (static_cast<int>(events_.events.size()) >= max_pending_events_) {
    events_ = CacheEvents{.reset = true};
    return;
  }
  events_.events.push_back(event);
}

BlockAllocator::CacheEvents BlockAllocator::TakeCacheEvents() { return std::exchange(events_, {}); }

std::vector<BlockId> BlockAllocator::FindCached(std::span<const BlockHash> hashes) const {
  std::vector<BlockId> blocks;
  for (BlockHash hash : hashes) {
    auto it = cached_.find(hash);
    if (it == cached_.end()) break;
    blocks.push_back(it->second);
  }
  return blocks;
}

}  // namespace baton::runtime
