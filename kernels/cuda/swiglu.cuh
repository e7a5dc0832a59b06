// SwiGLU kernel body: grid (column blocks, tokens), one element per thread.
#pragma once

#include <cmath>
#include <cstdint>

#include "baton/kernels/swiglu.h"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

inline constexpr int kSwigluThreads = 256;

inline simt::LaunchShape SwigluLaunchShape(const SwigluParams& p) {
  simt::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>((p.intermediate + kSwigluThreads - 1) / kSwigluThreads);
  shape.grid_y = static_cast<unsigned>(p.num_tokens);
  shape.block_x = kSwigluThreads;
  return shape;
}

BATON_GLOBAL void SwigluKernel(SwigluParams p) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= p.intermediate) return;
  const int64_t token = blockIdx.y;
  const float g = p.gate[token * p.in_stride + i];
  const float u = p.up[token * p.in_stride + i];
  p.out[token * p.out_stride + i] = g * u / (1.0f + expf(-g));
}

}  // namespace baton::kernels::cuda_detail
