// CUDA sampling (see baton/kernels/sample.h for the semantics). All pointers are device pointers.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "baton/kernels/sample.h"

namespace baton::kernels {

// Validates, then enqueues the kernel on `stream`. InvalidArgument from Validate(); Internal for a
// launch error. A row with a NaN logit gets token -1: the caller turns that into its error.
absl::Status Sample(const SampleParams& params, cudaStream_t stream);

// Every valid SampleParams is supported.
inline bool SampleSupported(const SampleParams& params) { return Validate(params).ok(); }

}  // namespace baton::kernels
