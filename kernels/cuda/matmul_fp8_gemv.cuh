// fp8-weight GEMV body (decode batches of up to kMatmulFp8GemvMaxRows rows; see
// baton/kernels/matmul.h for the fp8 layout): one warp per output column, each lane summing four
// consecutive weights of every 128 against every activation row (rounded to bf16, as the CPU's
// fp8 path and the GEMM's bf16 panels take them), each weight dequantized in f32 (its row's or
// group's scale times the exact fp8 value), a warp sum per row, then the bias. The weights are
// read once, as bytes. Sums in another order than the CPU's, so the two agree within f32 rounding.
#pragma once

#include "baton/kernels/matmul.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

inline constexpr int kMatmulFp8GemvWarps = 8;  // columns per block

inline simt::LaunchShape MatmulFp8GemvLaunchShape(const MatmulParams& p) {
  simt::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>((p.n + kMatmulFp8GemvWarps - 1) / kMatmulFp8GemvWarps);
  shape.block_x = kMatmulFp8GemvWarps * simt::kWarpSize;
  return shape;
}

BATON_GLOBAL void MatmulFp8GemvKernel(MatmulParams p) {
  const int warp = static_cast<int>(threadIdx.x) / simt::kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % simt::kWarpSize;
  const int j = static_cast<int>(blockIdx.x) * kMatmulFp8GemvWarps + warp;
  if (j >= p.n) return;  // the whole warp: its shuffles below never run
  const uint8_t* w = static_cast<const uint8_t*>(p.weight) + static_cast<int64_t>(j) * p.k;
  const int g = p.weight_group_size;
  const float* scales = p.weight_scales + static_cast<int64_t>(j) * (g > 0 ? p.k / g : 1);
  float acc[kMatmulFp8GemvMaxRows];
  for (int r = 0; r < kMatmulFp8GemvMaxRows; ++r) acc[r] = 0.0f;
  for (int l0 = lane * 4; l0 < p.k; l0 += simt::kWarpSize * 4) {
    for (int t = 0; t < 4 && l0 + t < p.k; ++t) {
      const int l = l0 + t;
      const float weight = scales[g > 0 ? l / g : 0] * simt::Fp8E4M3BitsToFloat(w[l]);
      for (int r = 0; r < p.m; ++r) {
        const float a =
            simt::Bf16BitsToFloat(simt::FloatToBf16Bits(p.in[static_cast<int64_t>(r) * p.k + l]));
        acc[r] += a * weight;
      }
    }
  }
  for (int r = 0; r < p.m; ++r) {
    const float sum = WarpSum(acc[r]);
    if (lane == 0) {
      p.out[static_cast<int64_t>(r) * p.n + j] = sum + (p.bias != nullptr ? p.bias[j] : 0.0f);
    }
  }
}

}  // namespace baton::kernels::cuda_detail
