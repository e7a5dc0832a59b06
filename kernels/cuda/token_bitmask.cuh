// Token bitmask kernel body: blockIdx.y picks the masked row, the x blocks' threads one token each.
// Each logit depends on its own bit alone, so the result is the CPU twin's exactly.
#pragma once

#include <math.h>

#include "baton/kernels/token_bitmask.h"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

inline constexpr int kTokenBitmaskThreads = 256;

inline simt::LaunchShape TokenBitmaskLaunchShape(const TokenBitmaskParams& p) {
  simt::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>((p.vocab_size + kTokenBitmaskThreads - 1) / kTokenBitmaskThreads);
  shape.grid_y = static_cast<unsigned>(p.num_masked);
  shape.block_x = kTokenBitmaskThreads;
  return shape;
}

BATON_GLOBAL void TokenBitmaskKernel(TokenBitmaskParams p) {
  const int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (t >= p.vocab_size) return;
  const int64_t m = blockIdx.y;
  if (!TokenAllowed(p.bitmask + m * p.bitmask_words, t)) {
    p.logits[int64_t{p.rows[m]} * p.vocab_size + t] = -INFINITY;
  }
}

}  // namespace baton::kernels::cuda_detail
