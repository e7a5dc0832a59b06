// RMSNorm with Llama semantics: out = in / sqrt(mean(in^2) + eps) * weight, in f32.
#pragma once

#include "absl/status/status.h"
#include "kernels/common/thread_pool.h"

namespace baton::kernels {

struct RmsNormParams {
  float* out;           // [num_tokens, hidden]; may alias `in`
  const float* in;      // [num_tokens, hidden]
  const float* weight;  // [hidden]
  int num_tokens;
  int hidden;
  float eps;  // > 0 is usual; >= 0 required
};

// Checks pointers (null allowed only when num_tokens == 0), hidden >= 1, eps >= 0.
absl::Status Validate(const RmsNormParams& params);

// Validates, then normalizes each row. `pool` may be nullptr.
absl::Status RmsNormCpu(const RmsNormParams& params, ThreadPool* pool);

}  // namespace baton::kernels
