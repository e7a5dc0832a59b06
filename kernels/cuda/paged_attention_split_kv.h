// CUDA split-KV decode attention (see baton/kernels/paged_attention_split_kv.h): two launches, the
// per-split pass and the merge. All pointers, including the workspace, are device pointers.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "baton/kernels/paged_attention_split_kv.h"

namespace baton::kernels {

// True iff Validate() passes and head_dim <= 256 (the plain decode kernel's bound).
bool PagedAttentionSplitKvSupported(const PagedAttentionSplitKvParams& params);

// Validates (InvalidArgument, also for an unsupported head_dim), then enqueues both passes on
// `stream`. The workspace must stay untouched until the merge has run (stream order sees to that
// for anything enqueued later on the same stream). The tables are not range-checked on the device:
// context_lens must be >= 1 and block ids valid.
absl::Status PagedAttentionSplitKv(const PagedAttentionSplitKvParams& params, cudaStream_t stream);

}  // namespace baton::kernels
