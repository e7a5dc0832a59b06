// The token bitmask of structured outputs, applied to the logits before sampling: every token a
// sequence's grammar does not allow next gets -inf, so no sampler (greedy, top-k/p, min-p) can
// draw it. The bitmasks come from the runtime's grammar matchers (runtime/structured_output), one
// row per constrained sequence; unconstrained rows are not listed and stay untouched. On the
// device (kernels/cuda/token_bitmask.cuh) or the CPU (TokenBitmaskCpu), alike: each logit is kept
// or set to -inf by its bit alone.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "baton/kernels/host_device.h"

namespace baton::kernels {

struct TokenBitmaskParams {
  float* logits;           // [num_rows, vocab_size], masked in place (num_rows: the caller's batch)
  const int32_t* bitmask;  // [num_masked, bitmask_words]: bit t % 32 of word t / 32 set => t allowed
  const int32_t* rows;     // [num_masked]: the logits row each bitmask row applies to, distinct
  int num_masked;
  int vocab_size;
  int bitmask_words;       // >= TokenBitmaskWordsFor(vocab_size); words past it are ignored
};

BATON_HOST_DEVICE inline int TokenBitmaskWordsFor(int vocab_size) { return (vocab_size + 31) / 32; }

// Whether token `t` is allowed by a bitmask row.
BATON_HOST_DEVICE inline bool TokenAllowed(const int32_t* bitmask_row, int t) {
  return ((static_cast<uint32_t>(bitmask_row[t / 32]) >> (t % 32)) & 1u) != 0;
}

// Checks num_masked >= 0, vocab_size >= 1, bitmask_words >= TokenBitmaskWordsFor(vocab_size), and
// the pointers (null allowed only when num_masked == 0). The arrays may be device memory and are
// not read: `rows` must name rows of the caller's logits.
absl::Status Validate(const TokenBitmaskParams& params);

// Validates, then masks every listed row on the host (host memory).
absl::Status TokenBitmaskCpu(const TokenBitmaskParams& params);

}  // namespace baton::kernels
