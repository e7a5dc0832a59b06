// KV write kernel body: one block per token; a slot's kv heads are adjacent in a block, so the
// token's K row and V row are each one contiguous run of num_kv_heads * head_dim elements (T: the
// cache element, kv_element.cuh).
#pragma once

#include <cstdint>

#include "baton/kernels/kv_write.h"
#include "kernels/cuda/kv_element.cuh"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

inline constexpr int kKvWriteThreads = 128;

inline simt::LaunchShape KvWriteLaunchShape(const KvWriteParams& p) {
  simt::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(p.num_tokens);
  shape.block_x = kKvWriteThreads;
  return shape;
}

template <typename T>
BATON_GLOBAL void KvWriteKernel(KvWriteParams p) {
  const int64_t token = blockIdx.x;
  const int64_t slot_idx = p.slot_mapping[token];
  if (slot_idx < 0) return;  // padding token
  const int head_dim = p.cache.head_dim;
  const int row_elems = p.cache.num_kv_heads * head_dim;
  const float* k = p.k + token * p.kv_stride;
  const float* v = p.v + token * p.kv_stride;
  T* cache_k = KvData<T>(p.cache.k);
  T* cache_v = KvData<T>(p.cache.v);
  for (int i = static_cast<int>(threadIdx.x); i < row_elems; i += static_cast<int>(blockDim.x)) {
    const int64_t dst = KvOffset(p.cache, slot_idx, i / head_dim) + i % head_dim;
    StoreKv(cache_k + dst, k[i]);
    StoreKv(cache_v + dst, v[i]);
  }
}

}  // namespace baton::kernels::cuda_detail
