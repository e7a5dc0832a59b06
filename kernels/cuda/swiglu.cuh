// SwiGLU kernel body: grid (tokens, column blocks), one element per thread. Tokens go on x, whose
// limit is 2^31 - 1 (y's is 65535: a prefill step of more tokens would not launch).
#pragma once

#include <cmath>
#include <cstdint>

#include "baton/kernels/swiglu.h"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

inline constexpr int kSwigluThreads = 256;

inline simt::LaunchShape SwigluLaunchShape(const SwigluParams& p) {
  simt::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(p.num_tokens);
  shape.grid_y = static_cast<unsigned>((p.intermediate + kSwigluThreads - 1) / kSwigluThreads);
  shape.block_x = kSwigluThreads;
  return shape;
}

BATON_GLOBAL void SwigluKernel(SwigluParams p) {
  const int i = static_cast<int>(blockIdx.y * blockDim.x + threadIdx.x);
  if (i >= p.intermediate) return;
  const int64_t token = blockIdx.x;
  const float g = p.gate[token * p.in_stride + i];
  const float u = p.up[token * p.in_stride + i];
  p.out[token * p.out_stride + i] = g * u / (1.0f + expf(-g));
}

}  // namespace baton::kernels::cuda_detail
