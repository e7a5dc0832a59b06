// Elementwise add, for residual connections: out[i] = a[i] + b[i].
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/common/thread_pool.h"

namespace baton::kernels {

struct AddParams {
  float* out;      // [n]; may alias `a` or `b` exactly
  const float* a;  // [n]
  const float* b;  // [n]
  int64_t n;
};

// Checks n >= 0 and the pointers (null allowed only when n == 0).
absl::Status Validate(const AddParams& params);

// Validates, then adds. `out` may alias `a` or `b`; any other overlap is undefined. `pool` may be
// nullptr.
absl::Status AddCpu(const AddParams& params, ThreadPool* pool);

}  // namespace baton::kernels
