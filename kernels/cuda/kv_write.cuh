// KV write kernel body: one block per token; a slot's kv heads are adjacent in a block, so the
// token's K row and V row are each one contiguous copy of num_kv_heads * head_dim floats.
#pragma once

#include <cstdint>

#include "baton/kernels/kv_write.h"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

inline constexpr int kKvWriteThreads = 128;

inline simt::LaunchShape KvWriteLaunchShape(const KvWriteParams& p) {
  simt::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(p.num_tokens);
  shape.block_x = kKvWriteThreads;
  return shape;
}

BATON_GLOBAL void KvWriteKernel(KvWriteParams p) {
  const int64_t token = blockIdx.x;
  const int64_t slot_idx = p.slot_mapping[token];
  if (slot_idx < 0) return;  // padding token
  const int head_dim = p.cache.head_dim;
  const int row_elems = p.cache.num_kv_heads * head_dim;
  const float* k = p.k + token * p.kv_stride;
  const float* v = p.v + token * p.kv_stride;
  for (int i = static_cast<int>(threadIdx.x); i < row_elems; i += static_cast<int>(blockDim.x)) {
    const int64_t dst = KvOffset(p.cache, slot_idx, i / head_dim) + i % head_dim;
    p.cache.k[dst] = k[i];
    p.cache.v[dst] = v[i];
  }
}

}  // namespace baton::kernels::cuda_detail
