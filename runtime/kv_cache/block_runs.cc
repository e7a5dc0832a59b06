#include "runtime/kv_cache/block_runs.h"

#include <cstdint>

#include "kernels/common/check.h"

namespace baton::runtime {

std::vector<BlockRun> CoalesceBlockRuns(std::span<const BlockId> src,
                                        std::span<const BlockId> dst) {
  BATON_CHECK(src.size() == dst.size());
  std::vector<BlockRun> runs;
  for (size_t i = 0; i < src.size(); ++i) {
    if (!runs.empty()) {
      BlockRun& last = runs.back();
      if (int64_t{src[i]} == int64_t{last.src_start} + last.num_blocks &&
          int64_t{dst[i]} == int64_t{last.dst_start} + last.num_blocks) {
        ++last.num_blocks;
        continue;
      }
    }
    runs.push_back(BlockRun{.src_start = src[i], .dst_start = dst[i], .num_blocks = 1});
  }
  return runs;
}

}  // namespace baton::runtime
