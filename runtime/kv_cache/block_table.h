// BlockTable: the KV blocks of one sequence, in token order, and how many tokens they hold.
//
// Token t of the sequence lives in block blocks()[t / block_size] at slot t % block_size. Metadata
// only; blocks come from a BlockAllocator and are returned by the owner of the table.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/kv_cache/block_allocator.h"

namespace baton::runtime {

// Blocks needed to hold num_tokens tokens.
constexpr int NumBlocksFor(int64_t num_tokens, int block_size) {
  return static_cast<int>((num_tokens + block_size - 1) / block_size);
}

class BlockTable {
 public:
  explicit BlockTable(int block_size) : block_size_(block_size) {}

  int block_size() const { return block_size_; }
  int num_tokens() const { return num_tokens_; }
  const std::vector<BlockId>& blocks() const { return blocks_; }
  // Leading blocks already named in the prefix cache (block_allocator.h), so each is named once.
  int num_cached_blocks() const { return num_cached_blocks_; }
  void set_num_cached_blocks(int n) { num_cached_blocks_ = n; }

  // Blocks to add before the table can hold num_new_tokens more tokens.
  int NumBlocksToAppend(int num_new_tokens) const {
    return NumBlocksFor(num_tokens_ + num_new_tokens, block_size_) - static_cast<int>(blocks_.size());
  }
  void AddBlocks(const std::vector<BlockId>& blocks) {
    blocks_.insert(blocks_.end(), blocks.begin(), blocks.end());
  }
  // Pre-condition: the blocks hold room for them (NumBlocksToAppend(n) <= 0).
  void AppendTokens(int num_new_tokens);

  // Flat slot index (block_id * block_size + slot) of token position pos < capacity.
  int32_t SlotOf(int pos) const;

  // Hands the blocks to the caller (to release them) and empties the table.
  std::vector<BlockId> TakeBlocks();
  // Moves the tokens to `blocks` (as many as the table has, holding the same tokens: a swap to or
  // from another pool, kv_swap.h) and hands the old ones to the caller.
  std::vector<BlockId> ReplaceBlocks(std::vector<BlockId> blocks);

 private:
  int block_size_;
  int num_tokens_ = 0;
  int num_cached_blocks_ = 0;
  std::vector<BlockId> blocks_;
};

}  // namespace baton::runtime
