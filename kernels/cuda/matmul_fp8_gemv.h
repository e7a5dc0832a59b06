// CUDA fp8-weight GEMV for decode batches (matmul_fp8_gemv.cuh). All pointers are device pointers.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "baton/kernels/matmul.h"

namespace baton::kernels {

// Validates (ValidateFp8Gemv: fp8 weights, m <= kMatmulFp8GemvMaxRows), then enqueues the kernel
// on `stream`. InvalidArgument for bad params; Internal for a launch error.
absl::Status MatmulFp8Gemv(const MatmulParams& params, cudaStream_t stream);

}  // namespace baton::kernels
