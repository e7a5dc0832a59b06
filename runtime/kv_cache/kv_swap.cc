#include "runtime/kv_cache/kv_swap.h"

namespace baton::runtime {

std::vector<BlockCopyRun> CoalesceBlockCopies(std::span<const BlockCopy> copies) {
  std::vector<BlockCopyRun> runs;
  for (const BlockCopy& copy : copies) {
    if (!runs.empty()) {
      BlockCopyRun& last = runs.back();
      if (copy.src == last.src + last.num_blocks && copy.dst == last.dst + last.num_blocks) {
        ++last.num_blocks;
        continue;
      }
    }
    runs.push_back(BlockCopyRun{.src = copy.src, .dst = copy.dst, .num_blocks = 1});
  }
  return runs;
}

}  // namespace baton::runtime
