// CUDA decode attention over the paged KV cache (see baton/kernels/paged_attention.h). All
// pointers, including the cache view's and the tables, are device pointers.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "baton/kernels/paged_attention.h"

namespace baton::kernels {

// True iff Validate() passes and head_dim <= 256.
bool PagedAttentionDecodeSupported(const PagedAttentionParams& params);

// Validates (InvalidArgument, also for an unsupported head_dim), then enqueues on `stream`. The
// tables are not range-checked on the device: context_lens must be >= 1 and block ids valid.
absl::Status PagedAttentionDecode(const PagedAttentionParams& params, cudaStream_t stream);

}  // namespace baton::kernels
