#include "runtime/kv_cache/block_allocator.h"

#include "absl/strings/str_cat.h"
#include "kernels/common/check.h"

namespace baton::runtime {

BlockAllocator::BlockAllocator(int num_blocks) : refcounts_(num_blocks, 0) {
  BATON_CHECK(num_blocks >= 0);
  free_list_.reserve(num_blocks);
  for (BlockId block = num_blocks - 1; block >= 0; --block) free_list_.push_back(block);
}

absl::StatusOr<std::vector<BlockId>> BlockAllocator::Allocate(int n) {
  if (n < 0 || !CanAllocate(n)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("KV cache: ", n, " blocks requested, ", num_blocks_free(), " free"));
  }
  std::vector<BlockId> blocks(free_list_.end() - n, free_list_.end());
  std::reverse(blocks.begin(), blocks.end());
  free_list_.resize(free_list_.size() - n);
  for (BlockId block : blocks) refcounts_[block] = 1;
  return blocks;
}

void BlockAllocator::IncRef(BlockId block) {
  BATON_CHECK(block >= 0 && block < num_blocks() && refcounts_[block] > 0);
  ++refcounts_[block];
}

void BlockAllocator::Release(BlockId block) {
  BATON_CHECK(block >= 0 && block < num_blocks() && refcounts_[block] > 0);
  if (--refcounts_[block] == 0) free_list_.push_back(block);
}

void BlockAllocator::Release(const std::vector<BlockId>& blocks) {
  for (BlockId block : blocks) Release(block);
}

int BlockAllocator::refcount(BlockId block) const {
  BATON_CHECK(block >= 0 && block < num_blocks());
  return refcounts_[block];
}

}  // namespace baton::runtime
