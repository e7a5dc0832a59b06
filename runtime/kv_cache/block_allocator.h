// BlockAllocator: which KV blocks of one pool are free, and how many owners each used block has.
//
// Metadata only; the storage is KvPool's. A block is free (refcount 0, on the free list) or used
// (refcount >= 1). Allocate takes blocks off the free list with refcount 1; IncRef lets a second owner
// (a prefix-sharing sequence, an in-flight KV transfer) keep a block alive; Release drops one owner
// and returns the block to the free list at zero. Not thread-safe: the engine thread owns it.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace baton::runtime {

using BlockId = int32_t;

class BlockAllocator {
 public:
  explicit BlockAllocator(int num_blocks);

  int num_blocks() const { return static_cast<int>(refcounts_.size()); }
  int num_blocks_free() const { return static_cast<int>(free_list_.size()); }
  int num_blocks_used() const { return num_blocks() - num_blocks_free(); }

  // Side-effect free: true if Allocate(n) would succeed now.
  bool CanAllocate(int n) const { return n <= num_blocks_free(); }

  // Takes n blocks (lowest ids first on a fresh allocator). ResourceExhausted if fewer are free:
  // callers that must not fail ask CanAllocate first.
  absl::StatusOr<std::vector<BlockId>> Allocate(int n);

  // Pre-condition: block is used. Adds an owner.
  void IncRef(BlockId block);
  // Pre-condition: block is used. Drops an owner; frees the block when none is left.
  void Release(BlockId block);
  void Release(const std::vector<BlockId>& blocks);

  int refcount(BlockId block) const;

 private:
  std::vector<int> refcounts_;      // [num_blocks]; 0 <=> on free_list_
  std::vector<BlockId> free_list_;  // a stack: the most recently freed block is reused first
};

}  // namespace baton::runtime
