// Embedding kernel body: one block per token, threads stride over the row converting to f32. An
// id outside [0, vocab_size) cannot return an error from the device: its row is filled with NaN.
#pragma once

#include <cmath>
#include <cstdint>

#include "baton/kernels/embedding.h"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

inline constexpr int kEmbeddingThreads = 256;

inline simt::LaunchShape EmbeddingLaunchShape(const EmbeddingParams& p) {
  simt::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(p.num_tokens);
  shape.block_x = kEmbeddingThreads;
  return shape;
}

BATON_GLOBAL void EmbeddingKernel(EmbeddingParams p) {
  const int64_t token = blockIdx.x;
  const int32_t id = p.token_ids[token];
  float* out = p.out + token * p.hidden;
  const int stride = static_cast<int>(blockDim.x);
  if (id < 0 || id >= p.vocab_size) {
    for (int d = static_cast<int>(threadIdx.x); d < p.hidden; d += stride) out[d] = NAN;
    return;
  }
  const int64_t row = int64_t{id} * p.hidden;
  for (int d = static_cast<int>(threadIdx.x); d < p.hidden; d += stride) {
    switch (p.table_dtype) {
      case DType::kF32:
        out[d] = static_cast<const float*>(p.table)[row + d];
        break;
      case DType::kBF16:
        out[d] = simt::Bf16BitsToFloat(static_cast<const uint16_t*>(p.table)[row + d]);
        break;
      case DType::kF16:
        out[d] = simt::HalfBitsToFloat(static_cast<const uint16_t*>(p.table)[row + d]);
        break;
      case DType::kI8:  // refused by Validate
      case DType::kI4:
      case DType::kF8E4M3:
        break;
    }
  }
}

}  // namespace baton::kernels::cuda_detail
