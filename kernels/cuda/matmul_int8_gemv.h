// CUDA int8-weight GEMV for decode batches (matmul_int8_gemv.cuh). All pointers are device
// pointers.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "baton/kernels/matmul.h"

namespace baton::kernels {

// Validates (Validate(params), int8 weights, m <= MatmulInt8GemvMaxRows()), then enqueues the
// kernel on `stream`. InvalidArgument for bad params; Internal for a launch error.
absl::Status MatmulInt8Gemv(const MatmulParams& params, cudaStream_t stream);

}  // namespace baton::kernels
