// Causal self-attention over a ragged batch of prompts (or prompt chunks), with grouped-query heads.
//
// Sequence s owns query rows [q_start[s], q_start[s+1]) and key/value rows [kv_start[s],
// kv_start[s+1]); q_len <= kv_len, and the queries are the LAST q_len positions of the sequence
// (chunked prefill or prefix caching put earlier positions in K/V only). Query i of the sequence
// attends key j iff j <= (kv_len - q_len) + i. Query head h reads kv head
// h / (num_heads / num_kv_heads).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/common/thread_pool.h"

namespace baton::kernels {

struct PrefillAttentionParams {
  float* out;               // [num_q_tokens, num_heads * head_dim]
  const float* q;           // [num_q_tokens, q_stride] holding [num_heads, head_dim]
  const float* k;           // [num_kv_tokens, kv_stride] holding [num_kv_heads, head_dim]
  const float* v;           // [num_kv_tokens, kv_stride] holding [num_kv_heads, head_dim]
  const int32_t* q_start;   // [num_seqs + 1] prefix sums, q_start[0] == 0
  const int32_t* kv_start;  // [num_seqs + 1] prefix sums, kv_start[0] == 0
  int num_seqs;
  int num_heads;
  int num_kv_heads;  // divides num_heads
  int head_dim;
  int q_stride;   // >= num_heads * head_dim
  int kv_stride;  // >= num_kv_heads * head_dim
  float scale;    // usually 1 / sqrt(head_dim)
  // >= every sequence's q_len. Needed only by the CUDA launcher, which sizes its grid with it
  // (q_start lives on the device there); the CPU ignores it.
  int max_q_len = 0;
  // The CUDA kernel may round q, k, v and the probabilities to bf16 and multiply on tensor cores
  // (head_dim 64 or 128; f32 accumulation), agreeing with the f32 computation within bf16's
  // tolerance rather than to f32 rounding: for bf16 models, whose activations the GEMMs round to
  // bf16 anyway. The CPU ignores it.
  bool allow_bf16_tensor_cores = false;
};

// Checks pointers, head divisibility and strides. Does not read q_start / kv_start.
absl::Status Validate(const PrefillAttentionParams& params);

// Validates, then checks the prefix sums (non-decreasing, start at 0, q_len <= kv_len per sequence;
// InvalidArgument naming the sequence otherwise), then computes softmax(q k^T * scale) v with the
// causal mask, online-softmax tiles, f32 accumulation. `out` must not overlap q, k or v. Runs over
// (sequence, kv head, query tile) work items on `pool` (may be nullptr).
absl::Status PrefillAttentionCpu(const PrefillAttentionParams& params, ThreadPool* pool);

}  // namespace baton::kernels
