// The two small kernels the CUDA runtime's GEMM needs around cuBLAS (CUDA builds only; included
// only by cuda_gpu_runtime.cc): rounding the activations to bf16 for a bf16-weight GEMM (cuBLAS
// multiplies bf16 by bf16 only, and MatmulCpu rounds them the same way), and seeding the output
// with the bias so that cuBLAS adds the product to it (beta = 1).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace baton::runtime::cuda_internal {

// out[i] = bf16(in[i]) rounded to nearest even, for i < n. Device pointers; n >= 0.
absl::Status RoundToBf16(const float* in, uint16_t* out, int64_t n, cudaStream_t stream);

// out[r, c] = bias[c] for r < m, c < n. Device pointers; m, n >= 0.
absl::Status BroadcastRows(float* out, const float* bias, int m, int n, cudaStream_t stream);

}  // namespace baton::runtime::cuda_internal
