// Split-KV decode attention bodies (see baton/kernels/paged_attention_split_kv.h).
//
// Pass 1, PagedAttentionSplitKvKernel: one block per (query head, sequence, split), the plain
// decode kernel's loop (DecodeAttendKeys) over the split's keys, whose un-normalized accumulator
// and softmax statistics go to the workspace. A split that starts past its sequence's context
// returns at once (uniformly for the block, so no barrier is skipped by some threads only).
//
// Pass 2, PagedAttentionSplitKvMergeKernel: one block per (query head, sequence); each thread owns
// dims tid, tid + blockDim.x, ... and walks the sequence's splits twice (max, then the weighted
// sums). The statistics are a few floats per split, read by every thread from cache, so no shared
// memory or barrier is needed.
#pragma once

#include <cstdint>

#include "baton/kernels/paged_attention_split_kv.h"
#include "kernels/cuda/paged_attention_attend.cuh"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

inline constexpr int kSplitKvMergeThreads = 128;

inline simt::LaunchShape PagedAttentionSplitKvLaunchShape(const PagedAttentionSplitKvParams& p) {
  simt::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(p.attn.num_heads);
  shape.grid_y = static_cast<unsigned>(p.attn.num_seqs);
  shape.grid_z = static_cast<unsigned>(p.num_splits);
  shape.block_x = kDecodeThreads;
  return shape;
}

inline simt::LaunchShape PagedAttentionSplitKvMergeLaunchShape(
    const PagedAttentionSplitKvParams& p) {
  simt::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(p.attn.num_heads);
  shape.grid_y = static_cast<unsigned>(p.attn.num_seqs);
  shape.block_x = kSplitKvMergeThreads;
  return shape;
}

// Splits that hold keys of a context of `len` tokens.
BATON_DEVICE int SplitKvNumSplitsOf(int len, int tokens_per_split) {
  return (len + tokens_per_split - 1) / tokens_per_split;
}

template <typename T>  // the cache element (kv_element.cuh)
BATON_GLOBAL void PagedAttentionSplitKvKernel(PagedAttentionSplitKvParams sp) {
  BATON_SHARED_ARRAY(float, q_s, kDecodeMaxHeadDim);
  BATON_SHARED_ARRAY(float, p_s, kDecodeChunk);
  BATON_SHARED_ARRAY(float, scratch, kDecodeThreads / simt::kWarpSize + 1);
  const PagedAttentionParams& p = sp.attn;
  const PagedAttentionSplitKvLayout layout = SplitKvLayout(p, sp.num_splits);
  const int head = static_cast<int>(blockIdx.x);
  const int seq = static_cast<int>(blockIdx.y);
  const int split = static_cast<int>(blockIdx.z);
  const int tid = static_cast<int>(threadIdx.x);
  const int num_threads = static_cast<int>(blockDim.x);
  const int head_dim = p.cache.head_dim;
  const int len = p.context_lens[seq];
  const int tokens_per_split = layout.blocks_per_split * p.cache.block_size;
  const int key_begin = split * tokens_per_split;
  if (key_begin >= len) return;
  const int key_end = len - key_begin < tokens_per_split ? len : key_begin + tokens_per_split;

  DecodeLoadQuery(p, seq, head, q_s);
  float acc[kDecodeDimsPerThread];
  float running_max;
  float running_sum;
  DecodeAttendKeys<T>(p, seq, head, key_begin, key_end, q_s, p_s, scratch, acc, running_max,
                   running_sum);
  const int64_t row = layout.Row(seq, head, p.num_heads) + split;
  float* partial = sp.workspace + row * head_dim;
  for (int i = 0; i < kDecodeDimsPerThread; ++i) {
    const int d = tid + i * num_threads;
    if (d < head_dim) partial[d] = acc[i];
  }
  if (tid == 0) {
    sp.workspace[layout.max_offset + row] = running_max;
    sp.workspace[layout.sum_offset + row] = running_sum;
  }
}

BATON_GLOBAL void PagedAttentionSplitKvMergeKernel(PagedAttentionSplitKvParams sp) {
  const PagedAttentionParams& p = sp.attn;
  const PagedAttentionSplitKvLayout layout = SplitKvLayout(p, sp.num_splits);
  const int head = static_cast<int>(blockIdx.x);
  const int seq = static_cast<int>(blockIdx.y);
  const int head_dim = p.cache.head_dim;
  const int num_splits = SplitKvNumSplitsOf(p.context_lens[seq],
                                            layout.blocks_per_split * p.cache.block_size);
  const int64_t row0 = layout.Row(seq, head, p.num_heads);
  const float* split_max = sp.workspace + layout.max_offset + row0;
  const float* split_sum = sp.workspace + layout.sum_offset + row0;

  // Every split holds >= 1 key, so each m_s is finite and the weights below are <= 1 with one of
  // them exactly 1: no overflow, and the total is >= 1.
  float global_max = -INFINITY;
  for (int s = 0; s < num_splits; ++s) global_max = fmaxf(global_max, split_max[s]);
  float total = 0.0f;
  for (int s = 0; s < num_splits; ++s) total += expf(split_max[s] - global_max) * split_sum[s];
  const float inv_total = 1.0f / total;
  float* out = p.out + (int64_t{seq} * p.num_heads + head) * head_dim;
  for (int d = static_cast<int>(threadIdx.x); d < head_dim; d += static_cast<int>(blockDim.x)) {
    float value = 0.0f;
    for (int s = 0; s < num_splits; ++s) {
      value += expf(split_max[s] - global_max) * sp.workspace[(row0 + s) * head_dim + d];
    }
    out[d] = value * inv_total;
  }
}

}  // namespace baton::kernels::cuda_detail
