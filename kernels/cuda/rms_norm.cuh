// RMSNorm kernel body: one block per token row; each thread sums the squares of a strided slice,
// a block reduction gives 1/rms, then each thread scales its slice.
#pragma once

#include "baton/kernels/rms_norm.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

inline constexpr int kRmsNormThreads = 256;

inline simt::LaunchShape RmsNormLaunchShape(const RmsNormParams& p) {
  simt::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(p.num_tokens);
  shape.block_x = kRmsNormThreads;
  return shape;
}

BATON_GLOBAL void RmsNormKernel(RmsNormParams p) {
  BATON_SHARED_ARRAY(float, scratch, kRmsNormThreads / simt::kWarpSize + 1);
  const int64_t row = blockIdx.x;
  const float* in = p.in + row * p.hidden;
  float* out = p.out + row * p.hidden;
  float sum_sq = 0.0f;
  for (int d = static_cast<int>(threadIdx.x); d < p.hidden; d += static_cast<int>(blockDim.x)) {
    sum_sq += in[d] * in[d];
  }
  sum_sq = BlockSum(sum_sq, scratch);
  const float inv_rms = rsqrtf(sum_sq / static_cast<float>(p.hidden) + p.eps);
  // Each thread rewrites only the elements it read, so out == in is safe.
  for (int d = static_cast<int>(threadIdx.x); d < p.hidden; d += static_cast<int>(blockDim.x)) {
    out[d] = in[d] * inv_rms * p.weight[d];
  }
}

}  // namespace baton::kernels::cuda_detail
