// Decode attention kernel body: one block per (query head, sequence). The context is processed in
// chunks of kDecodeChunk keys: each thread scores whole keys (q . k over head_dim, q staged in
// shared memory), block reductions give the chunk max and sum, and an online-softmax rescale merges
// chunks, so any context length works with bounded shared memory. Each thread owns output dims
// tid, tid + blockDim.x, ... (head_dim <= kDecodeMaxHeadDim) and accumulates p_j * v_j over the
// chunk, reading V rows coalesced.
#pragma once

#include <cstdint>

#include "baton/kernels/paged_attention.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

inline constexpr int kDecodeThreads = 128;
inline constexpr int kDecodeChunk = 512;
inline constexpr int kDecodeMaxHeadDim = 256;
inline constexpr int kDecodeDimsPerThread = kDecodeMaxHeadDim / kDecodeThreads;

inline simt::LaunchShape PagedAttentionDecodeLaunchShape(const PagedAttentionParams& p) {
  simt::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(p.num_heads);
  shape.grid_y = static_cast<unsigned>(p.num_seqs);
  shape.block_x = kDecodeThreads;
  return shape;
}

BATON_GLOBAL void PagedAttentionDecodeKernel(PagedAttentionParams p) {
  BATON_SHARED_ARRAY(float, q_s, kDecodeMaxHeadDim);
  BATON_SHARED_ARRAY(float, p_s, kDecodeChunk);
  BATON_SHARED_ARRAY(float, scratch, kDecodeThreads / simt::kWarpSize + 1);
  const PagedKvView& cache = p.cache;
  const int head = static_cast<int>(blockIdx.x);
  const int seq = static_cast<int>(blockIdx.y);
  const int tid = static_cast<int>(threadIdx.x);
  const int num_threads = static_cast<int>(blockDim.x);
  const int head_dim = cache.head_dim;
  const int kv_head = head / (p.num_heads / cache.num_kv_heads);
  const int len = p.context_lens[seq];
  const int32_t* table = p.block_tables + int64_t{seq} * p.max_blocks_per_seq;

  const float* q = p.q + int64_t{seq} * p.q_stride + int64_t{head} * head_dim;
  for (int d = tid; d < head_dim; d += num_threads) q_s[d] = q[d] * p.scale;
  __syncthreads();

  float acc[kDecodeDimsPerThread];
  for (int i = 0; i < kDecodeDimsPerThread; ++i) acc[i] = 0.0f;
  float running_max = -INFINITY;
  float running_sum = 0.0f;
  for (int c0 = 0; c0 < len; c0 += kDecodeChunk) {
    const int n = len - c0 < kDecodeChunk ? len - c0 : kDecodeChunk;
    float local_max = -INFINITY;
    for (int j = tid; j < n; j += num_threads) {
      const int key = c0 + j;
      const int64_t slot_idx =
          int64_t{table[key / cache.block_size]} * cache.block_size + key % cache.block_size;
      const float* k = cache.k + KvOffset(cache, slot_idx, kv_head);
      float score = 0.0f;
      for (int d = 0; d < head_dim; ++d) score += q_s[d] * k[d];
      p_s[j] = score;
      local_max = fmaxf(local_max, score);
    }
    const float chunk_max = BlockMax(local_max, scratch);
    const float new_max = fmaxf(running_max, chunk_max);
    const float alpha = expf(running_max - new_max);  // 0 on the first chunk
    float local_sum = 0.0f;
    for (int j = tid; j < n; j += num_threads) {
      const float e = expf(p_s[j] - new_max);
      p_s[j] = e;
      local_sum += e;
    }
    const float chunk_sum = BlockSum(local_sum, scratch);  // its barriers publish p_s
    running_sum = running_sum * alpha + chunk_sum;
    running_max = new_max;
    for (int i = 0; i < kDecodeDimsPerThread; ++i) acc[i] *= alpha;
    for (int j = 0; j < n; ++j) {
      const int key = c0 + j;
      const int64_t slot_idx =
          int64_t{table[key / cache.block_size]} * cache.block_size + key % cache.block_size;
      const float* v = cache.v + KvOffset(cache, slot_idx, kv_head);
      const float pj = p_s[j];
      for (int i = 0; i < kDecodeDimsPerThread; ++i) {
        const int d = tid + i * num_threads;
        if (d < head_dim) acc[i] += pj * v[d];
      }
    }
    __syncthreads();  // p_s is rewritten by the next chunk
  }
  float* out = p.out + (int64_t{seq} * p.num_heads + head) * head_dim;
  const float inv_sum = 1.0f / running_sum;
  for (int i = 0; i < kDecodeDimsPerThread; ++i) {
    const int d = tid + i * num_threads;
    if (d < head_dim) out[d] = acc[i] * inv_sum;
  }
}

}  // namespace baton::kernels::cuda_detail
