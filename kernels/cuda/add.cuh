// Residual add kernel body: one element per thread, 1-D grid.
#pragma once

#include <cstdint>

#include "baton/kernels/add.h"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

inline constexpr int kAddThreads = 256;
// gridDim.x is at most 2^31 - 1.
inline constexpr int64_t kAddMaxBlocks = 2147483647;

inline int64_t AddNumBlocks(int64_t n) { return (n + kAddThreads - 1) / kAddThreads; }

inline simt::LaunchShape AddLaunchShape(const AddParams& p) {
  simt::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(AddNumBlocks(p.n));
  shape.block_x = kAddThreads;
  return shape;
}

BATON_GLOBAL void AddKernel(AddParams p) {
  // 64-bit index: n may exceed 2^31 (a large batch times a wide hidden size).
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.n) return;
  // Read both before writing: out may alias a or b (same element only, so no race).
  p.out[i] = p.a[i] + p.b[i];
}

}  // namespace baton::kernels::cuda_detail
