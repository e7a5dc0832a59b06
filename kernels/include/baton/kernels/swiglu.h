// The SwiGLU activation of Llama's MLP: out = silu(gate) * up, silu(x) = x / (1 + exp(-x)).
#pragma once

#include "absl/status/status.h"
#include "kernels/common/thread_pool.h"

namespace baton::kernels {

struct SwigluParams {
  float* out;         // [num_tokens, out_stride], first `intermediate` used; may alias gate
  const float* gate;  // [num_tokens, in_stride], first `intermediate` used
  const float* up;    // [num_tokens, in_stride], first `intermediate` used
  int num_tokens;
  int intermediate;
  int in_stride;   // >= intermediate
  int out_stride;  // >= intermediate
};

// Checks pointers (null allowed only when num_tokens == 0) and strides.
absl::Status Validate(const SwigluParams& params);

// Validates, then computes. `out` may alias `gate` (or `up`) exactly, with out_stride == in_stride;
// any other overlap is undefined. `pool` may be nullptr.
absl::Status SwigluCpu(const SwigluParams& params, ThreadPool* pool);

}  // namespace baton::kernels
