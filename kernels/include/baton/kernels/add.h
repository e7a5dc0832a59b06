// Elementwise add, for residual connections: out[i] = a[i] + b[i].
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/common/thread_pool.h"

namespace baton::kernels {

// out, a, b: [n]. `out` may alias `a` or `b`. InvalidArgument if n < 0 or a pointer is null while
// n > 0. `pool` may be nullptr.
absl::Status AddCpu(float* out, const float* a, const float* b, int64_t n, ThreadPool* pool);

}  // namespace baton::kernels
