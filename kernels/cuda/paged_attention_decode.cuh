// Decode attention kernel body: one block per (query head, sequence), running the loop of
// paged_attention_attend.cuh over the whole context and dividing by the softmax sum.
#pragma once

#include <cstdint>

#include "baton/kernels/paged_attention.h"
#include "kernels/cuda/paged_attention_attend.cuh"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

inline simt::LaunchShape PagedAttentionDecodeLaunchShape(const PagedAttentionParams& p) {
  simt::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(p.num_heads);
  shape.grid_y = static_cast<unsigned>(p.num_seqs);
  shape.block_x = kDecodeThreads;
  return shape;
}

template <typename T>  // the cache element (kv_element.cuh)
BATON_GLOBAL void PagedAttentionDecodeKernel(PagedAttentionParams p) {
  BATON_SHARED_ARRAY(float, q_s, kDecodeMaxHeadDim);
  BATON_SHARED_ARRAY(float, p_s, kDecodeChunk);
  BATON_SHARED_ARRAY(float, scratch, kDecodeThreads / simt::kWarpSize + 1);
  const int head = static_cast<int>(blockIdx.x);
  const int seq = static_cast<int>(blockIdx.y);
  const int tid = static_cast<int>(threadIdx.x);
  const int num_threads = static_cast<int>(blockDim.x);
  const int head_dim = p.cache.head_dim;

  DecodeLoadQuery(p, seq, head, q_s);
  float acc[kDecodeDimsPerThread];
  float running_max;
  float running_sum;
  DecodeAttendKeys<T>(p, seq, head, 0, p.context_lens[seq], q_s, p_s, scratch, acc, running_max,
                   running_sum);
  float* out = p.out + (int64_t{seq} * p.num_heads + head) * head_dim;
  const float inv_sum = 1.0f / running_sum;
  for (int i = 0; i < kDecodeDimsPerThread; ++i) {
    const int d = tid + i * num_threads;
    if (d < head_dim) out[d] = acc[i] * inv_sum;
  }
}

}  // namespace baton::kernels::cuda_detail
