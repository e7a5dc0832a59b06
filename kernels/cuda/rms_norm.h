// CUDA RMSNorm (see baton/kernels/rms_norm.h for the semantics). All pointers are device pointers.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "baton/kernels/rms_norm.h"

namespace baton::kernels {

// Validates, then enqueues the kernel on `stream`. InvalidArgument from Validate(); Internal for a
// launch error.
absl::Status RmsNorm(const RmsNormParams& params, cudaStream_t stream);

// Every valid RmsNormParams is supported.
inline bool RmsNormSupported(const RmsNormParams& params) { return Validate(params).ok(); }

}  // namespace baton::kernels
