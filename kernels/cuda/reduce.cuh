// Warp and block reductions shared by the kernel bodies (nvcc and SIMT emulation alike).
#pragma once

#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

BATON_DEVICE float WarpSum(float value) {
  for (int offset = simt::kWarpSize / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

BATON_DEVICE float WarpMax(float value) {
  for (int offset = simt::kWarpSize / 2; offset > 0; offset /= 2) {
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
}

// Sum of `value` over the block; every thread gets the result. blockDim.x must be a multiple of
// the warp size; `scratch` is shared memory of >= blockDim.x / 32 + 1 floats. Contains two
// __syncthreads(), so every thread of the block must call it.
BATON_DEVICE float BlockSum(float value, float* scratch) {
  const int warp = static_cast<int>(threadIdx.x) / simt::kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % simt::kWarpSize;
  const int num_warps = static_cast<int>(blockDim.x) / simt::kWarpSize;
  value = WarpSum(value);
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < num_warps ? scratch[lane] : 0.0f;
    value = WarpSum(value);
    if (lane == 0) scratch[num_warps] = value;
  }
  __syncthreads();
  return scratch[num_warps];
}

// Max of `value` over the block; same contract as BlockSum.
BATON_DEVICE float BlockMax(float value, float* scratch) {
  const int warp = static_cast<int>(threadIdx.x) / simt::kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % simt::kWarpSize;
  const int num_warps = static_cast<int>(blockDim.x) / simt::kWarpSize;
  value = WarpMax(value);
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < num_warps ? scratch[lane] : -INFINITY;
    value = WarpMax(value);
    if (lane == 0) scratch[num_warps] = value;
  }
  __syncthreads();
  return scratch[num_warps];
}

}  // namespace baton::kernels::cuda_detail
