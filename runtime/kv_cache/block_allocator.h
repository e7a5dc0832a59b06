// BlockAllocator: which KV blocks of one pool are free, how many owners each used block has, and
// which full blocks the prefix cache names by content.
//
// Metadata only; the storage is KvPool's. A block is used (refcount >= 1) or has no owner; a block
// with no owner is either plain free or cached: it still holds the K/V of a full block some
// sequence computed, named by its BlockHash (block_hash.h), for a later sequence with the same
// prefix to take instead of computing it again (vLLM's automatic prefix caching). Both count as
// free: Allocate takes plain free blocks first, and only when none is left evicts cached ones,
// least recently released first. Allocate hands blocks out with refcount 1; IncRef adds an owner
// (a sequence sharing a prefix, an in-flight KV transfer, a cache hit); Release drops one.
//
// Cache events (RecordCacheEvents): the hashes the cache names and the ones it evicts, in order,
// for the global scheduler's index of where each prefix lives (KV-aware routing, as Dynamo's KV
// events). At most max_pending are kept between two TakeCacheEvents; past that they are dropped and
// the events say `reset`, so their reader starts again from CachedHashes().
// Not thread-safe: the engine thread owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/kv_cache/block_hash.h"

namespace baton::runtime {

using BlockId = int32_t;

class BlockAllocator {
 public:
  explicit BlockAllocator(int num_blocks);

  int num_blocks() const { return static_cast<int>(refcounts_.size()); }
  // Blocks Allocate may hand out: plain free ones and cached ones no sequence holds.
  int num_blocks_free() const { return static_cast<int>(free_list_.size()) + num_evictable_; }
  int num_blocks_used() const { return num_blocks() - num_blocks_free(); }
  // Blocks the prefix cache names (held or not).
  int num_blocks_cached() const { return static_cast<int>(cached_.size()); }

  // Side-effect free: true if Allocate(n) would succeed now.
  bool CanAllocate(int n) const { return n <= num_blocks_free(); }

  // Takes n blocks (lowest ids first on a fresh allocator), evicting cached blocks when the plain
  // free ones run out. ResourceExhausted if fewer are free: callers that must not fail ask
  // CanAllocate first.
  absl::StatusOr<std::vector<BlockId>> Allocate(int n);

  // Pre-condition: block is used, or cached (a prefix cache hit takes it back from eviction).
  // Adds an owner.
  void IncRef(BlockId block);
  // Pre-condition: block is used. Drops an owner; at none the block is free (cached ones keep
  // their content until evicted).
  void Release(BlockId block);
  // Releases the blocks of one sequence, last first, so its prefix is the last to be evicted.
  void Release(const std::vector<BlockId>& blocks);

  int refcount(BlockId block) const;

  // Names a used block's content `hash` in the prefix cache. False, changing nothing, when the hash
  // names another block already (the same prefix computed twice at once: this copy stays private)
  // or the block has a name.
  bool Cache(BlockId block, BlockHash hash);
  // The blocks named by the longest leading run of hashes.
  std::vector<BlockId> FindCached(std::span<const BlockHash> hashes) const;
  bool IsCached(BlockId block) const { return cached_hash_[block].has_value(); }
  // Every hash the cache names now, in no order.
  std::vector<BlockHash> CachedHashes() const;

  struct CacheEvent {
    BlockHash hash = 0;
    bool stored = true;  // named; false: evicted
    bool operator==(const CacheEvent&) const = default;
  };
  struct CacheEvents {
    bool reset = false;  // events were lost: the reader's view of this cache is void
    std::vector<CacheEvent> events;  // in order
    bool empty() const { return !reset && events.empty(); }
  };
  void RecordCacheEvents(int max_pending);
  CacheEvents TakeCacheEvents();

 private:
  // The evictable list: cached blocks with no owner, least recently released at the head.
  void LinkEvictable(BlockId block);
  void UnlinkEvictable(BlockId block);
  void RecordEvent(CacheEvent event);

  std::vector<int> refcounts_;      // [num_blocks]
  std::vector<BlockId> free_list_;  // plain free blocks, a stack: the last freed is reused first
  std::vector<std::optional<BlockHash>> cached_hash_;  // [num_blocks]
  absl::flat_hash_map<BlockHash, BlockId> cached_;
  // Doubly linked through [num_blocks + 1] entries; entry num_blocks is the sentinel.
  std::vector<BlockId> prev_, next_;
  int num_evictable_ = 0;
  int max_pending_events_ = 0;  // 0: no events are kept
  CacheEvents events_;
};

}  // namespace baton::runtime
