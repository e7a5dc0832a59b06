// KV gather kernel body: one block per (token position, sequence); a slot's kv heads are adjacent
// in a block, so the block's threads stride over the token's num_kv_heads * head_dim elements of K
// and of V. Blocks past their sequence's length leave at once.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "baton/kernels/kv_gather.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/kv_element.cuh"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

inline constexpr int kKvGatherThreads = 128;

// What KvGatherSupported() checks; shared by the launcher and the emulation.
inline absl::Status KvGatherCheckSupported(const KvGatherParams& p) {
  RETURN_IF_ERROR(Validate(p));
  if (p.num_seqs > 65535 || (p.num_seqs > 0 && p.max_len < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("KvGather (CUDA): unsupported num_seqs ",
                                                   p.num_seqs, " or max_len ", p.max_len));
  }
  return absl::OkStatus();
}

inline simt::LaunchShape KvGatherLaunchShape(const KvGatherParams& p) {
  simt::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(p.max_len);
  shape.grid_y = static_cast<unsigned>(p.num_seqs);
  shape.block_x = kKvGatherThreads;
  return shape;
}

template <typename T>  // the cache element (kv_element.cuh)
BATON_GLOBAL void KvGatherKernel(KvGatherParams p) {
  const int seq = static_cast<int>(blockIdx.y);
  const int pos = static_cast<int>(blockIdx.x);
  const int row_begin = p.out_start[seq];
  if (pos >= p.out_start[seq + 1] - row_begin) return;  // past the sequence's length
  const int block_size = p.cache.block_size;
  const int32_t block_id = p.block_tables[int64_t{seq} * p.max_blocks_per_seq + pos / block_size];
  const int64_t slot_idx = int64_t{block_id} * block_size + pos % block_size;
  const int head_dim = p.cache.head_dim;
  const int row_elems = p.cache.num_kv_heads * head_dim;
  const int64_t row = int64_t{row_begin} + pos;
  float* k = p.k_out + row * p.out_stride;
  float* v = p.v_out + row * p.out_stride;
  const T* cache_k = KvData<const T>(p.cache.k);
  const T* cache_v = KvData<const T>(p.cache.v);
  for (int i = static_cast<int>(threadIdx.x); i < row_elems; i += static_cast<int>(blockDim.x)) {
    const int64_t src = KvOffset(p.cache, slot_idx, i / head_dim) + i % head_dim;
    k[i] = LoadKv(cache_k + src);
    v[i] = LoadKv(cache_v + src);
  }
}

}  // namespace baton::kernels::cuda_detail
