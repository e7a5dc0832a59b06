// CUDA token bitmask (see baton/kernels/token_bitmask.h). All pointers are device pointers.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "baton/kernels/token_bitmask.h"

namespace baton::kernels {

// Validates, then enqueues the kernel on `stream`. InvalidArgument from Validate(); Internal for a
// launch error.
absl::Status TokenBitmask(const TokenBitmaskParams& params, cudaStream_t stream);

}  // namespace baton::kernels
