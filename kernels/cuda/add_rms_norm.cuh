// Residual add + RMSNorm kernel body: one block per token row. Each thread adds its strided slice
// of `in` into the residual (writing it back) while summing the squares of the sums; a block
// reduction gives 1/rms; then each thread scales the slice it wrote. A thread touches only its own
// elements, so no barrier is needed between the passes beyond the reduction's, and `out` may alias
// `in`.
#pragma once

#include "baton/kernels/add_rms_norm.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

inline constexpr int kAddRmsNormThreads = 256;

inline simt::LaunchShape AddRmsNormLaunchShape(const AddRmsNormParams& p) {
  simt::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(p.num_tokens);
  shape.block_x = kAddRmsNormThreads;
  return shape;
}

BATON_GLOBAL void AddRmsNormKernel(AddRmsNormParams p) {
  BATON_SHARED_ARRAY(float, scratch, kAddRmsNormThreads / simt::kWarpSize + 1);
  const int64_t row = blockIdx.x;
  float* residual = p.residual + row * p.hidden;
  const float* in = p.in + row * p.hidden;
  float* out = p.out + row * p.hidden;
  const int tid = static_cast<int>(threadIdx.x);
  const int num_threads = static_cast<int>(blockDim.x);
  float sum_sq = 0.0f;
  for (int d = tid; d < p.hidden; d += num_threads) {
    const float r = residual[d] + in[d];
    residual[d] = r;
    sum_sq += r * r;
  }
  sum_sq = BlockSum(sum_sq, scratch);
  const float inv_rms = rsqrtf(sum_sq / static_cast<float>(p.hidden) + p.eps);
  for (int d = tid; d < p.hidden; d += num_threads) out[d] = residual[d] * inv_rms * p.weight[d];
}

}  // namespace baton::kernels::cuda_detail
