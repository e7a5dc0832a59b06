// CUDA residual add + RMSNorm (see baton/kernels/add_rms_norm.h for the semantics). All pointers
// are device pointers.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "baton/kernels/add_rms_norm.h"

namespace baton::kernels {

// Validates, then enqueues the kernel on `stream`. InvalidArgument from Validate(); Internal for a
// launch error.
absl::Status AddRmsNorm(const AddRmsNormParams& params, cudaStream_t stream);

// Every valid AddRmsNormParams is supported.
inline bool AddRmsNormSupported(const AddRmsNormParams& params) { return Validate(params).ok(); }

}  // namespace baton::kernels
