// The small kernels the CUDA runtime's GEMM needs around cuBLAS (CUDA builds only; included only by
// cuda_gpu_runtime.cc): rounding the activations to bf16 or f16 for a GEMM with weights of that
// dtype (cuBLAS multiplies bf16 by bf16 and f16 by f16 only, and MatmulCpu rounds them the same
// way), and seeding the output with the bias so that cuBLAS adds the product to it (beta = 1).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace baton::runtime::cuda_internal {

// out[i] = bf16(in[i]) rounded to nearest even, for i < n. Device pointers; n >= 0.
absl::Status RoundToBf16(const float* in, uint16_t* out, int64_t n, cudaStream_t stream);

// out[i] = f16(in[i]) (IEEE half) rounded to nearest even, for i < n: +-inf beyond +-65504 (from
// 65520 on), f16 subnormals kept. Device pointers; n >= 0.
absl::Status RoundToF16(const float* in, uint16_t* out, int64_t n, cudaStream_t stream);

// out[r, c] = bias[c] for r < m, c < n. Device pointers; m, n >= 0.
absl::Status BroadcastRows(float* out, const float* bias, int m, int n, cudaStream_t stream);

// out[i] = bf16(q[i]), exact (|q| <= 128 needs 8 significant bits), for i < n: int8 weights
// widened for a bf16 GEMM. Device pointers; n >= 0.
absl::Status WidenInt8ToBf16(const int8_t* q, uint16_t* out, int64_t n, cudaStream_t stream);

// Rows [0, rows) of int4 weights (kernels/include/baton/kernels/matmul.h's layout, rows of k
// columns, groups of group_size) dequantized to bf16: out[r, c] = bf16(scale[r, g] * (u - zero[r,
// g])), zero 8 where zeros is null. `packed`, `scales` and `zeros` point at the first row's. Device
// pointers; rows >= 0.
absl::Status DequantizeInt4ToBf16(const uint8_t* packed, const float* scales, const float* zeros,
                                  int group_size, int rows, int k, uint16_t* out,
                                  cudaStream_t stream);

// Rows [0, rows) of fp8 E4M3 weights (rows of k bytes) dequantized to bf16: out[r, c] =
// bf16(scale * fp8(q[r, c])) with scale scales[r] (group_size 0) or scales[r, c / group_size].
// `codes` and `scales` point at the first row's. Device pointers; rows >= 0.
absl::Status DequantizeFp8ToBf16(const uint8_t* codes, const float* scales, int group_size, int rows,
                                 int k, uint16_t* out, cudaStream_t stream);

// out[r, c] = out[r, c] * scales[c] + (bias ? bias[c] : 0) for r < m, c < n: the sums of an int8
// GEMM made the layer's output. Device pointers (bias may be null); m, n >= 0.
absl::Status ScaleColumns(float* out, const float* scales, const float* bias, int m, int n,
                          cudaStream_t stream);

}  // namespace baton::runtime::cuda_internal
