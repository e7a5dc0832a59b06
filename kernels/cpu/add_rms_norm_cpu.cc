// The same arithmetic as AddCpu then RmsNormCpu, in the same order and through the same Dot, so
// that fusing the two in the forward pass changes no bit of the CPU backend's results.
#include <cmath>

#include "baton/kernels/add_rms_norm.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vec_math.h"

namespace baton::kernels {

absl::Status AddRmsNormCpu(const AddRmsNormParams& p, ThreadPool* pool) {
  RETURN_IF_ERROR(Validate(p));
  const int64_t hidden = p.hidden;
  internal::ParallelChunks(pool, p.num_tokens, 4 * hidden, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      float* residual = p.residual + t * hidden;
      const float* in = p.in + t * hidden;
      float* out = p.out + t * hidden;
      // `in` is read completely before `out` (which may alias it) is written.
      for (int64_t d = 0; d < hidden; ++d) residual[d] = residual[d] + in[d];
      const float mean_sq = internal::Dot(residual, residual, hidden) / static_cast<float>(hidden);
      const float inv_rms = 1.0f / std::sqrt(mean_sq + p.eps);
      for (int64_t d = 0; d < hidden; ++d) out[d] = residual[d] * inv_rms * p.weight[d];
    }
  });
  return absl::OkStatus();
}

}  // namespace baton::kernels
