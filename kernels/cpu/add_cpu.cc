#include "absl/strings/str_cat.h"
#include "baton/kernels/add.h"
#include "kernels/cpu/parallel.h"

namespace baton::kernels {

absl::Status AddCpu(float* out, const float* a, const float* b, int64_t n, ThreadPool* pool) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat("Add: n = ", n, " is negative"));
  if (n > 0 && (out == nullptr || a == nullptr || b == nullptr)) {
    return absl::InvalidArgumentError("Add: null pointer with n > 0");
  }
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
