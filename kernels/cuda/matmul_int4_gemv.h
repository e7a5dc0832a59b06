// CUDA int4-weight GEMV for decode batches (matmul_int4_gemv.cuh). All pointers are device
// pointers.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "baton/kernels/matmul.h"

namespace baton::kernels {

// Validates (ValidateInt4Gemv), then enqueues the kernel on `stream`. InvalidArgument for bad
// params; Internal for a launch error.
absl::Status MatmulInt4Gemv(const MatmulParams& params, cudaStream_t stream);

}  // namespace baton::kernels
