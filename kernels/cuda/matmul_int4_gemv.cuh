// int4-weight GEMV body (decode batches of up to kMatmulInt4GemvMaxRows rows; see
// baton/kernels/matmul.h for the int4 layout): one warp per output column, each lane taking whole
// 32-column blocks (16 bytes: one 128-bit load) of the row, every 32nd block. A block lies in one
// group, so a lane sums a[r, c] * u and a[r, c] over it and adds scale * (sum_u - zero * sum_a)
// per activation row; a warp sum per row, then the bias. The activations are rounded to bf16 and
// the weights dequantized in f32 (W4A16, as the GEMM's bf16 panels take them), so this agrees with
// the CPU's prefill-sized products up to rounding, not with its int8-activation decode GEMV.
#pragma once

#include "baton/kernels/matmul.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

inline constexpr int kMatmulInt4GemvWarps = 8;  // columns per block

inline simt::LaunchShape MatmulInt4GemvLaunchShape(const MatmulParams& p) {
  simt::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>((p.n + kMatmulInt4GemvWarps - 1) / kMatmulInt4GemvWarps);
  shape.block_x = kMatmulInt4GemvWarps * simt::kWarpSize;
  return shape;
}

BATON_GLOBAL void MatmulInt4GemvKernel(MatmulParams p) {
  const int warp = static_cast<int>(threadIdx.x) / simt::kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % simt::kWarpSize;
  const int j = static_cast<int>(blockIdx.x) * kMatmulInt4GemvWarps + warp;
  if (j >= p.n) return;  // the whole warp: its shuffles below never run
  const int groups = p.k / p.weight_group_size;
  const uint8_t* row = static_cast<const uint8_t*>(p.weight) + static_cast<int64_t>(j) * (p.k / 2);
  float acc[kMatmulInt4GemvMaxRows];
  for (int r = 0; r < kMatmulInt4GemvMaxRows; ++r) acc[r] = 0.0f;
  for (int block = lane; block * kInt4ColumnBlock < p.k; block += simt::kWarpSize) {
    const int c0 = block * kInt4ColumnBlock;
    const uint8_t* bytes = row + c0 / 2;
    const int64_t g = static_cast<int64_t>(j) * groups + c0 / p.weight_group_size;
    const float scale = p.weight_scales[g];
    const float zero = p.weight_zeros != nullptr ? p.weight_zeros[g] : 8.0f;
    for (int r = 0; r < p.m; ++r) {
      const float* a = p.in + static_cast<int64_t>(r) * p.k + c0;
      float sum_u = 0.0f;
      float sum_a = 0.0f;
      for (int b = 0; b < kInt4ColumnBlock / 2; ++b) {
        const float a_low = simt::Bf16BitsToFloat(simt::FloatToBf16Bits(a[b]));
        const float a_high = simt::Bf16BitsToFloat(simt::FloatToBf16Bits(a[b + 16]));
        sum_u += a_low * static_cast<float>(bytes[b] & 0xF) + a_high * static_cast<float>(bytes[b] >> 4);
        sum_a += a_low + a_high;
      }
      acc[r] += scale * (sum_u - zero * sum_a);
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
