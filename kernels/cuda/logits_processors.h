// CUDA logits processors (see baton/kernels/logits_processors.h). All pointers are device pointers.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "baton/kernels/logits_processors.h"

namespace baton::kernels {

// Validates, then enqueues the kernel on `stream`. InvalidArgument from Validate(); Internal for a
// launch error.
absl::Status LogitsProcessors(const LogitsProcessorsParams& params, cudaStream_t stream);

}  // namespace baton::kernels
