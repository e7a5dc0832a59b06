// RMSNorm fused with the residual add before it, the pair a pre-norm transformer runs between its
// sublayers:
//   residual += in;  out = residual / sqrt(mean(residual^2) + eps) * weight
// row by row, in f32. The result is the one AddCpu followed by RmsNormCpu of the updated residual
// gives (the CPU twin matches it bit for bit); on a GPU one kernel reads and writes the rows once
// instead of three passes over memory and two launches.
#pragma once

#include "absl/status/status.h"
#include "kernels/common/thread_pool.h"

namespace baton::kernels {

struct AddRmsNormParams {
  float* out;           // [num_tokens, hidden]; may alias `in`
  float* residual;      // [num_tokens, hidden]; read, then overwritten with residual + in
  const float* in;      // [num_tokens, hidden]: what the sublayer adds to the residual stream
  const float* weight;  // [hidden]
  int num_tokens;
  int hidden;
  float eps;  // > 0 is usual; >= 0 required
};

// Checks pointers (null allowed only when num_tokens == 0; weight never), hidden >= 1, eps >= 0
// and finite, and that out is not residual (the updated residual would be lost).
absl::Status Validate(const AddRmsNormParams& params);

// Validates, then updates and normalizes each row. `out` may alias `in`; any other overlap is
// undefined. `pool` may be nullptr.
absl::Status AddRmsNormCpu(const AddRmsNormParams& params, ThreadPool* pool);

}  // namespace baton::kernels
