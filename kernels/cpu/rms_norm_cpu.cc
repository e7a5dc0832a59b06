#include <cmath>

#include "baton/kernels/rms_norm.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vec_math.h"

namespace baton::kernels {

absl::Status RmsNormCpu(const RmsNormParams& p, ThreadPool* pool) {
  RETURN_IF_ERROR(Validate(p));
  const int64_t hidden = p.hidden;
  internal::ParallelChunks(pool, p.num_tokens, 3 * hidden, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      const float* in = p.in + t * hidden;
      float* out = p.out + t * hidden;
      const float mean_sq = internal::Dot(in, in, hidden) / static_cast<float>(hidden);
      const float inv_rms = 1.0f / std::sqrt(mean_sq + p.eps);
      // Element-wise from here on, so out == in is safe.
      for (int64_t d = 0; d < hidden; ++d) out[d] = in[d] * inv_rms * p.weight[d];
    }
  });
  return absl::OkStatus();
}

}  // namespace baton::kernels
