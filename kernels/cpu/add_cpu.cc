#include <algorithm>

#include "baton/kernels/add.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/parallel.h"

namespace baton::kernels {

absl::Status AddCpu(const AddParams& params, ThreadPool* pool) {
  RETURN_IF_ERROR(Validate(params));
  float* out = params.out;
  const float* a = params.a;
  const float* b = params.b;
  const int64_t n = params.n;
  // Chunks of 4096 elements keep each thread's share contiguous and vector-aligned in length.
  constexpr int64_t kChunk = 4096;
  const int64_t num_chunks = (n + kChunk - 1) / kChunk;
  internal::ParallelChunks(pool, num_chunks, kChunk / 4, [&](int64_t begin, int64_t end, int) {
    const int64_t lo = begin * kChunk;
    const int64_t hi = std::min(n, end * kChunk);
    for (int64_t i = lo; i < hi; ++i) out[i] = a[i] + b[i];
  });
  return absl::OkStatus();
}

}  // namespace baton::kernels
