// Prefill attention kernel body, flash-style: one block per (query tile of kTileRows(head_dim)
// queries, query head, sequence). The block stages its query tile in shared memory, then walks
// key/value tiles of the same size up to the causal limit of its last query: it stages K and V,
// computes the score tile, updates each row's running max and sum (online softmax), rescales the
// output accumulators (also in shared memory) and adds P.V. Shared memory is
// (2 * rows * head_dim [Q, O] + 2 * rows * head_dim [K, V] + rows * rows [S] + 3 * rows) floats,
// under 48 KiB for head_dim <= 256.
#pragma once

#include <cmath>
#include <cstdint>

#include "baton/kernels/host_device.h"
#include "baton/kernels/prefill_attention.h"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

inline constexpr int kPrefillThreads = 128;
inline constexpr int kPrefillMaxHeadDim = 256;

// Queries per block and keys per tile.
BATON_HOST_DEVICE inline int PrefillTileRows(int head_dim) { return head_dim <= 128 ? 16 : 8; }

inline size_t PrefillSharedBytes(int head_dim) {
  const size_t rows = static_cast<size_t>(PrefillTileRows(head_dim));
  return (4 * rows * head_dim + rows * rows + 3 * rows) * sizeof(float);
}

inline simt::LaunchShape PrefillAttentionLaunchShape(const PrefillAttentionParams& p) {
  const int rows = PrefillTileRows(p.head_dim);
  simt::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>((p.max_q_len + rows - 1) / rows);
  shape.grid_y = static_cast<unsigned>(p.num_heads);
  shape.grid_z = static_cast<unsigned>(p.num_seqs);
  shape.block_x = kPrefillThreads;
  shape.dynamic_shared_bytes = PrefillSharedBytes(p.head_dim);
  return shape;
}

BATON_GLOBAL void PrefillAttentionKernel(PrefillAttentionParams p) {
  BATON_DYNAMIC_SHARED(float, smem);
  const int head_dim = p.head_dim;
  const int rows = PrefillTileRows(head_dim);  // queries per block == keys per tile
  float* q_s = smem;                           // [rows, head_dim], pre-scaled
  float* o_s = q_s + rows * head_dim;          // [rows, head_dim] unnormalized output
  float* k_s = o_s + rows * head_dim;          // [rows, head_dim] key tile
  float* v_s = k_s + rows * head_dim;          // [rows, head_dim] value tile
  float* s_s = v_s + rows * head_dim;          // [rows, rows] scores, then probabilities
  float* m_s = s_s + rows * rows;              // [rows] running max
  float* l_s = m_s + rows;                     // [rows] running sum
  float* a_s = l_s + rows;                     // [rows] rescale factor of this tile

  const int seq = static_cast<int>(blockIdx.z);
  const int head = static_cast<int>(blockIdx.y);
  const int q_begin = static_cast<int>(blockIdx.x) * rows;
  const int q_len = p.q_start[seq + 1] - p.q_start[seq];
  const int kv_len = p.kv_start[seq + 1] - p.kv_start[seq];
  if (q_begin >= q_len) return;  // the whole block leaves before any barrier
  const int num_rows = q_len - q_begin < rows ? q_len - q_begin : rows;
  const int offset = kv_len - q_len;  // query i sees keys [0, offset + i]
  const int kv_head = head / (p.num_heads / p.num_kv_heads);
  const int tid = static_cast<int>(threadIdx.x);
  const int num_threads = static_cast<int>(blockDim.x);
  const int tile_elems = rows * head_dim;

  const int64_t q_row0 = int64_t{p.q_start[seq]} + q_begin;
  for (int i = tid; i < tile_elems; i += num_threads) {
    const int r = i / head_dim;
    const int d = i % head_dim;
    q_s[i] = r < num_rows ? p.q[(q_row0 + r) * p.q_stride + int64_t{head} * head_dim + d] * p.scale
                          : 0.0f;
    o_s[i] = 0.0f;
  }
  for (int r = tid; r < rows; r += num_threads) {
    m_s[r] = -INFINITY;
    l_s[r] = 0.0f;
  }
  const int64_t kv_row0 = p.kv_start[seq];
  const int num_keys_total = offset + q_begin + num_rows;  // keys the last query sees
  for (int j0 = 0; j0 < num_keys_total; j0 += rows) {
    __syncthreads();  // previous tile's readers are done with k_s, v_s, s_s
    for (int i = tid; i < tile_elems; i += num_threads) {
      const int c = i / head_dim;
      const int d = i % head_dim;
      const bool valid = j0 + c < num_keys_total;
      const int64_t src = (kv_row0 + j0 + c) * p.kv_stride + int64_t{kv_head} * head_dim + d;
      k_s[i] = valid ? p.k[src] : 0.0f;
      v_s[i] = valid ? p.v[src] : 0.0f;
    }
    __syncthreads();
    for (int i = tid; i < rows * rows; i += num_threads) {
      const int r = i / rows;
      const int c = i % rows;
      const int key = j0 + c;
      float score = -INFINITY;
      if (r < num_rows && key <= offset + q_begin + r) {
        score = 0.0f;
        for (int d = 0; d < head_dim; ++d) score += q_s[r * head_dim + d] * k_s[c * head_dim + d];
      }
      s_s[i] = score;
    }
    __syncthreads();
    for (int r = tid; r < rows; r += num_threads) {
      float tile_max = -INFINITY;
      for (int c = 0; c < rows; ++c) tile_max = fmaxf(tile_max, s_s[r * rows + c]);
      const float new_max = fmaxf(m_s[r], tile_max);
      if (new_max == -INFINITY) {  // nothing visible yet (padding row): leave the row alone
        a_s[r] = 1.0f;
        for (int c = 0; c < rows; ++c) s_s[r * rows + c] = 0.0f;
        continue;
      }
      float sum = 0.0f;
      for (int c = 0; c < rows; ++c) {
        const float e = expf(s_s[r * rows + c] - new_max);  // masked: exp(-inf) = 0
        s_s[r * rows + c] = e;
        sum += e;
      }
      a_s[r] = expf(m_s[r] - new_max);
      l_s[r] = l_s[r] * a_s[r] + sum;
      m_s[r] = new_max;
    }
    __syncthreads();
    for (int i = tid; i < tile_elems; i += num_threads) {
      const int r = i / head_dim;
      const int d = i % head_dim;
      float acc = o_s[i] * a_s[r];
      for (int c = 0; c < rows; ++c) acc += s_s[r * rows + c] * v_s[c * head_dim + d];
      o_s[i] = acc;
    }
  }
  __syncthreads();
  for (int i = tid; i < num_rows * head_dim; i += num_threads) {
    const int r = i / head_dim;
    const int d = i % head_dim;
    p.out[(q_row0 + r) * p.num_heads * head_dim + int64_t{head} * head_dim + d] =
        o_s[i] / l_s[r];
  }
}

}  // namespace baton::kernels::cuda_detail
