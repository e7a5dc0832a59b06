#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "baton/kernels/rope.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/parallel.h"

namespace baton::kernels {

namespace {

// Rotates `num_heads` heads of `head_dim` starting at x, heads `head_dim` apart.
void RotateHeads(float* x, int num_heads, int head_dim, const float* cos_a, const float* sin_a) {
  const int half = head_dim / 2;
  for (int h = 0; h < num_heads; ++h) {
    float* lo = x + int64_t{h} * head_dim;
    float* hi = lo + half;
    for (int i = 0; i < half; ++i) {
      const float x0 = lo[i];
      const float x1 = hi[i];
      lo[i] = x0 * cos_a[i] - x1 * sin_a[i];
      hi[i] = x1 * cos_a[i] + x0 * sin_a[i];
    }
  }
}

}  // namespace

absl::Status RopeCpu(const RopeParams& p, ThreadPool* pool) {
  RETURN_IF_ERROR(Validate(p));
  for (int t = 0; t < p.num_tokens; ++t) {
    if (p.positions[t] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Rope: position ", p.positions[t], " of token ", t, " is negative"));
    }
  }
  const int half = p.head_dim / 2;
  const int64_t work = int64_t{p.num_heads + p.num_kv_heads} * p.head_dim * 3 + half * 20;
  internal::ParallelChunks(pool, p.num_tokens, work, [&](int64_t begin, int64_t end, int) {
    std::vector<float> cos_a(half);
    std::vector<float> sin_a(half);
    for (int64_t t = begin; t < end; ++t) {
      const float pos = static_cast<float>(p.positions[t]);
      for (int i = 0; i < half; ++i) {
        const float angle = pos * p.inv_freq[i];
        cos_a[i] = std::cos(angle);
        sin_a[i] = std::sin(angle);
      }
      RotateHeads(p.q + t * p.q_stride, p.num_heads, p.head_dim, cos_a.data(), sin_a.data());
      if (p.num_kv_heads > 0) {
        RotateHeads(p.k + t * p.k_stride, p.num_kv_heads, p.head_dim, cos_a.data(), sin_a.data());
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace baton::kernels
