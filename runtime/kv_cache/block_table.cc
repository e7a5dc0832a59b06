#include "runtime/kv_cache/block_table.h"

#include <utility>

#include "kernels/common/check.h"

namespace baton::runtime {

void BlockTable::AppendTokens(int num_new_tokens) {
  BATON_CHECK(num_new_tokens >= 0 && NumBlocksToAppend(num_new_tokens) <= 0);
  num_tokens_ += num_new_tokens;
}

int32_t BlockTable::SlotOf(int pos) const {
  BATON_DCHECK(pos >= 0 && pos / block_size_ < static_cast<int>(blocks_.size()));
  return blocks_[pos / block_size_] * block_size_ + pos % block_size_;
}

std::vector<BlockId> BlockTable::TakeBlocks() {
  num_tokens_ = 0;
  num_cached_blocks_ = 0;
  return std::exchange(blocks_, {});
}

std::vector<BlockId> BlockTable::ReplaceBlocks(std::vector<BlockId> blocks) {
  BATON_CHECK(blocks.size() == blocks_.size());
  num_cached_blocks_ = 0;  // the new blocks are named when a step next computes with them
  return std::exchange(blocks_, std::move(blocks));
}

}  // namespace baton::runtime
