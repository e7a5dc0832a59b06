#include <cmath>

#include "baton/kernels/swiglu.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vec_math.h"

namespace baton::kernels {

namespace {

// out[i] = gate[i] / (1 + exp(-gate[i])) * up[i]; element-wise, so out may alias gate or up.
void SwigluRow(float* out, const float* gate, const float* up, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 one = _mm512_set1_ps(1.0f);
  auto silu_mul = [&](__m512 g, __m512 u) {
    const __m512 e = internal::Exp512(_mm512_sub_ps(_mm512_setzero_ps(), g));
    return _mm512_div_ps(_mm512_mul_ps(g, u), _mm512_add_ps(one, e));
  };
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(out + i, silu_mul(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  }
  if (i < n) {
    const __mmask16 mask = internal::TailMask(static_cast<int>(n - i));
    _mm512_mask_storeu_ps(out + i, mask,
                          silu_mul(_mm512_maskz_loadu_ps(mask, gate + i),
                                   _mm512_maskz_loadu_ps(mask, up + i)));
    i = n;
  }
#elif defined(__AVX2__) && defined(__FMA__)
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = internal::Exp256(_mm256_sub_ps(_mm256_setzero_ps(), g));
    _mm256_storeu_ps(out + i, _mm256_div_ps(_mm256_mul_ps(g, _mm256_loadu_ps(up + i)),
                                            _mm256_add_ps(one, e)));
  }
#endif
  for (; i < n; ++i) out[i] = gate[i] * up[i] / (1.0f + std::exp(-gate[i]));
}

}  // namespace

absl::Status SwigluCpu(const SwigluParams& p, ThreadPool* pool) {
  RETURN_IF_ERROR(Validate(p));
  internal::ParallelChunks(pool, p.num_tokens, int64_t{p.intermediate} * 8,
                           [&](int64_t begin, int64_t end, int) {
                             for (int64_t t = begin; t < end; ++t) {
                               SwigluRow(p.out + t * p.out_stride, p.gate + t * p.in_stride,
                                         p.up + t * p.in_stride, p.intermediate);
                             }
                           });
  return absl::OkStatus();
}

}  // namespace baton::kernels
