// CUDA prefill attention, flash-style tiles (see baton/kernels/prefill_attention.h). Device
// pointers, including q_start and kv_start.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "baton/kernels/prefill_attention.h"

namespace baton::kernels {

// True iff Validate() passes, head_dim <= 256, num_heads and num_seqs fit the grid (<= 65535) and
// max_q_len >= 1 when num_seqs > 0.
bool PrefillAttentionSupported(const PrefillAttentionParams& params);

// Validates (InvalidArgument also when unsupported), then enqueues on `stream`. The prefix sums are
// not checked on the device: every q_len must be <= max_q_len and <= its kv_len.
absl::Status PrefillAttention(const PrefillAttentionParams& params, cudaStream_t stream);

}  // namespace baton::kernels
