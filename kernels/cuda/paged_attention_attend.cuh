// The loop of decode attention over a range of one sequence's keys, shared by the plain kernel
// (paged_attention_decode.cuh: the whole context) and the split-KV kernel
// (paged_attention_split_kv.cuh: one split). The range is processed in chunks of kDecodeChunk
// keys: each thread scores whole keys (q . k over head_dim, q staged in shared memory), block
// reductions give the chunk max and sum, and an online-softmax rescale merges chunks, so any range
// works with bounded shared memory. Each thread owns output dims tid, tid + blockDim.x, ...
// (head_dim <= kDecodeMaxHeadDim) and accumulates p_j * v_j over the chunk, reading V rows
// coalesced. Device functions only: a __global__ here would be defined in every .cu including it.
#pragma once

#include <cstdint>

#include "baton/kernels/paged_attention.h"
#include "kernels/cuda/kv_element.cuh"
#include "kernels/cuda/reduce.cuh"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

inline constexpr int kDecodeThreads = 128;
inline constexpr int kDecodeChunk = 512;
inline constexpr int kDecodeMaxHeadDim = 256;
inline constexpr int kDecodeDimsPerThread = kDecodeMaxHeadDim / kDecodeThreads;

// Online softmax of query head `head` of sequence `seq` over its keys [key_begin, key_end): on
// return every thread holds the running max and sum of the (scaled) scores, and in acc[i] dim
// tid + i * blockDim.x of sum_j e^(score_j - running_max) v_j (not yet divided by the sum; dims past
// head_dim stay 0). q_s holds q * scale, published by a barrier. Contains barriers: every thread of
// the block calls it with the same range. T is the cache element (kv_element.cuh).
template <typename T>
BATON_DEVICE void DecodeAttendKeys(const PagedAttentionParams& p, int seq, int head, int key_begin,
                                   int key_end, const float* q_s, float* p_s, float* scratch,
                                   float (&acc)[kDecodeDimsPerThread], float& running_max,
                                   float& running_sum) {
  const PagedKvView& cache = p.cache;
  const int tid = static_cast<int>(threadIdx.x);
  const int num_threads = static_cast<int>(blockDim.x);
  const int head_dim = cache.head_dim;
  const int kv_head = head / (p.num_heads / cache.num_kv_heads);
  const int32_t* table = p.block_tables + int64_t{seq} * p.max_blocks_per_seq;
  const T* cache_k = KvData<const T>(cache.k);
  const T* cache_v = KvData<const T>(cache.v);

  for (int i = 0; i < kDecodeDimsPerThread; ++i) acc[i] = 0.0f;
  running_max = -INFINITY;
  running_sum = 0.0f;
  for (int c0 = key_begin; c0 < key_end; c0 += kDecodeChunk) {
    const int n = key_end - c0 < kDecodeChunk ? key_end - c0 : kDecodeChunk;
    float local_max = -INFINITY;
    for (int j = tid; j < n; j += num_threads) {
      const int key = c0 + j;
      const int64_t slot_idx =
          int64_t{table[key / cache.block_size]} * cache.block_size + key % cache.block_size;
      const T* k = cache_k + KvOffset(cache, slot_idx, kv_head);
      float score = 0.0f;
      for (int d = 0; d < head_dim; ++d) score += q_s[d] * LoadKv(k + d);
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
      const T* v = cache_v + KvOffset(cache, slot_idx, kv_head);
      const float pj = p_s[j];
      for (int i = 0; i < kDecodeDimsPerThread; ++i) {
        const int d = tid + i * num_threads;
        if (d < head_dim) acc[i] += pj * LoadKv(v + d);
      }
    }
    __syncthreads();  // p_s is rewritten by the next chunk
  }
}

// Loads q * scale of (seq, head) into q_s and publishes it.
BATON_DEVICE void DecodeLoadQuery(const PagedAttentionParams& p, int seq, int head, float* q_s) {
  const int head_dim = p.cache.head_dim;
  const float* q = p.q + int64_t{seq} * p.q_stride + int64_t{head} * head_dim;
  for (int d = static_cast<int>(threadIdx.x); d < head_dim; d += static_cast<int>(blockDim.x)) {
    q_s[d] = q[d] * p.scale;
  }
  __syncthreads();
}

}  // namespace baton::kernels::cuda_detail
