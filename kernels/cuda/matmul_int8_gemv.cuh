// int8-weight GEMV body (decode batches of up to kMatmulInt8GemvMaxRows rows, matmul.h; see
// baton/kernels/matmul.h for the int8 semantics): one warp per output column, each lane summing
// four consecutive weights of every 128 against every activation row (rounded to bf16, as the
// CPU's int8 path and the GEMM's bf16 panels take them), a warp sum per row, then the column's
// scale and bias. The weights are read once, as bytes: what makes int8 decode cheaper than bf16.
// Sums in another order than the CPU's, so the two agree within f32 rounding.
#pragma once

#include "baton/kernels/matmul.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

inline constexpr int kMatmulInt8GemvWarps = 8;  // columns per block

inline simt::LaunchShape MatmulInt8GemvLaunchShape(const MatmulParams& p) {
  simt::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>((p.n + kMatmulInt8GemvWarps - 1) / kMatmulInt8GemvWarps);
  shape.block_x = kMatmulInt8GemvWarps * simt::kWarpSize;
  return shape;
}

BATON_GLOBAL void MatmulInt8GemvKernel(MatmulParams p) {
  const int warp = static_cast<int>(threadIdx.x) / simt::kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % simt::kWarpSize;
  const int j = static_cast<int>(blockIdx.x) * kMatmulInt8GemvWarps + warp;
  if (j >= p.n) return;  // the whole warp: its shuffles below never run
  const int8_t* w = static_cast<const int8_t*>(p.weight) + static_cast<int64_t>(j) * p.k;
  float acc[kMatmulInt8GemvMaxRows];
  for (int r = 0; r < kMatmulInt8GemvMaxRows; ++r) acc[r] = 0.0f;
  for (int l0 = lane * 4; l0 < p.k; l0 += simt::kWarpSize * 4) {
    for (int t = 0; t < 4 && l0 + t < p.k; ++t) {
      const float q = static_cast<float>(w[l0 + t]);
      for (int r = 0; r < p.m; ++r) {
        const float a = simt::Bf16BitsToFloat(
            simt::FloatToBf16Bits(p.in[static_cast<int64_t>(r) * p.k + l0 + t]));
        acc[r] += a * q;
      }
    }
  }
  for (int r = 0; r < p.m; ++r) {
    const float sum = WarpSum(acc[r]);
    if (lane == 0) {
      p.out[static_cast<int64_t>(r) * p.n + j] =
          sum * p.weight_scales[j] + (p.bias != nullptr ? p.bias[j] : 0.0f);
    }
  }
}

}  // namespace baton::kernels::cuda_detail
