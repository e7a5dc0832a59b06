// RoPE kernel body: one block per token; thread i handles pairs (head, i) of q and then k, with
// angle = position * inv_freq[i] (an f32 product, as the CPU twin and HF).
#pragma once

#include <cmath>
#include <cstdint>

#include "baton/kernels/rope.h"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

inline constexpr int kRopeThreads = 128;

inline simt::LaunchShape RopeLaunchShape(const RopeParams& p) {
  simt::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(p.num_tokens);
  shape.block_x = kRopeThreads;
  return shape;
}

BATON_GLOBAL void RopeKernel(RopeParams p) {
  const int64_t token = blockIdx.x;
  const int half = p.head_dim / 2;
  const float pos = static_cast<float>(p.positions[token]);
  const int num_pairs = (p.num_heads + p.num_kv_heads) * half;
  for (int idx = static_cast<int>(threadIdx.x); idx < num_pairs;
       idx += static_cast<int>(blockDim.x)) {
    const int head = idx / half;  // q heads first, then k heads
    const int i = idx % half;
    float* x = head < p.num_heads
                   ? p.q + token * p.q_stride + int64_t{head} * p.head_dim
                   : p.k + token * p.k_stride + int64_t{head - p.num_heads} * p.head_dim;
    const float angle = pos * p.inv_freq[i];
    const float c = cosf(angle);
    const float s = sinf(angle);
    const float x0 = x[i];
    const float x1 = x[i + half];
    x[i] = x0 * c - x1 * s;
    x[i + half] = x1 * c + x0 * s;
  }
}

}  // namespace baton::kernels::cuda_detail
