// Vectorized math shared by the CPU kernels: exp, horizontal sums and small helpers. AVX-512 when
// the translation unit is compiled for it (the fast CPU files get -march=native), else AVX2 + FMA
// (x86-64 CPUs without AVX-512: Zen 2/3, most laptops), scalar otherwise.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/simd.h"

namespace baton::kernels::internal {

// The exp kernels' constants, shared by every vector width: range reduction x = n ln2 + r with ln2
// split in a high and a low part, and the degree-6 polynomial for e^r (Cephes expf coefficients,
// highest degree first).
namespace exp_constants {
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;
inline constexpr float kPoly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                   4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
}  // namespace exp_constants

#if defined(__AVX512F__)

// exp(x) for 16 floats, relative error ~2 ulp over the normal range; exp(-inf) = 0, exp(+big) = inf.
// Range reduction x = n ln2 + r, |r| <= ln2/2, a degree-6 polynomial for e^r (Cephes expf
// coefficients), then scalef by 2^n (which handles overflow and underflow).
inline __m512 Exp512(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
  x = _mm512_min_ps(x, _mm512_set1_ps(89.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(exp_constants::kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(exp_constants::kLn2Hi), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(exp_constants::kLn2Lo), r);
  __m512 p = _mm512_set1_ps(exp_constants::kPoly[0]);
  for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(exp_constants::kPoly[i]));
  const __m512 r2 = _mm512_mul_ps(r, r);
  p = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

// Mask with the low `count` (0..16) lanes set.
inline __mmask16 TailMask(int count) {
  return static_cast<__mmask16>((uint32_t{1} << count) - 1);
}

// Lane j of the result is the sum of the 16 lanes of v[j] (a 16x16 transpose-and-add).
inline __m512 Reduce16(const __m512 v[16]) {
  __m512 w[8];
  for (int i = 0; i < 8; ++i) {
    w[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                         _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  }
  __m512 x[4];
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(w[2 * i]);
    const __m512d b = _mm512_castps_pd(w[2 * i + 1]);
    x[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  // x[i]: in 128-bit lane L, element c holds lane L's partial sum of v[4i + c].
  const __m512 z0 = _mm512_add_ps(_mm512_shuffle_f32x4(x[0], x[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(x[0], x[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 z1 = _mm512_add_ps(_mm512_shuffle_f32x4(x[2], x[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(x[2], x[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(z0, z1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(z0, z1, _MM_SHUFFLE(3, 1, 3, 1)));
}

#elif defined(__AVX2__) && defined(__FMA__)

// exp(x) for 8 floats: the same reduction and polynomial as Exp512, with 2^n built in the exponent
// bits (no scalef on AVX2); results below e^-87.3 (where 2^n leaves the normal range) are 0.
inline __m256 Exp256(__m256 x) {
  const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  x = _mm256_min_ps(x, _mm256_set1_ps(88.7f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(exp_constants::kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(exp_constants::kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(exp_constants::kLn2Lo), r);
  __m256 p = _mm256_set1_ps(exp_constants::kPoly[0]);
  for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(exp_constants::kPoly[i]));
  const __m256 r2 = _mm256_mul_ps(r, r);
  p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // n is in [-126, 128]: 2^n is (n + 127) in the exponent field (128 gives +inf, as exp overflows).
  const __m256i bits = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(underflow, _mm256_mul_ps(p, _mm256_castsi256_ps(bits)));
}

// Lanes [0, count) set (count in 0..8), for _mm256_maskload_ps / _mm256_maskstore_ps.
inline __m256i TailMask8(int count) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float HorizontalMax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

#endif  // __AVX512F__, __AVX2__

// exp over an array in place: x[i] = exp(x[i] - shift); returns the sum of the results.
inline float ExpShiftSum(float* x, int64_t n, float shift) {
  int64_t i = 0;
  float sum = 0;
#if defined(__AVX512F__)
  __m512 acc = _mm512_setzero_ps();
  const __m512 vshift = _mm512_set1_ps(shift);
  for (; i + 16 <= n; i += 16) {
    const __m512 e = Exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i), vshift));
    _mm512_storeu_ps(x + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (i < n) {
    const __mmask16 mask = TailMask(static_cast<int>(n - i));
    const __m512 e = Exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + i), vshift));
    _mm512_mask_storeu_ps(x + i, mask, e);
    acc = _mm512_add_ps(acc, _mm512_maskz_mov_ps(mask, e));
    i = n;
  }
  sum = _mm512_reduce_add_ps(acc);
#elif defined(__AVX2__) && defined(__FMA__)
  __m256 acc = _mm256_setzero_ps();
  const __m256 vshift = _mm256_set1_ps(shift);
  for (; i + 8 <= n; i += 8) {
    const __m256 e = Exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vshift));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  sum = HorizontalSum(acc);
#endif
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - shift);
    sum += x[i];
  }
  return sum;
}

// Writes the indices i < n with x[i] >= threshold to out (which has room for n), in increasing
// order; returns how many.
inline int64_t IndicesWhereAtLeast(const float* x, int64_t n, float threshold, int32_t* out) {
  int64_t num = 0;
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 vt = _mm512_set1_ps(threshold);
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  for (; i + 16 <= n; i += 16) {
    const __mmask16 mask = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), vt, _CMP_GE_OQ);
    const __m512i idx = _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int32_t>(i)));
    _mm512_mask_compressstoreu_epi32(out + num, mask, idx);
    num += __builtin_popcount(mask);
  }
#endif
  for (; i < n; ++i) {
    if (x[i] >= threshold) out[num++] = static_cast<int32_t>(i);
  }
  return num;
}

// Dot product of two f32 arrays of length n.
inline float Dot(const float* a, const float* b, int64_t n) {
  int64_t i = 0;
  float sum = 0;
#if defined(__AVX512F__)
  __m512 acc0 = _mm512_setzero_ps();
  __m512 acc1 = _mm512_setzero_ps();
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
  }
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
  }
  if (i < n) {
    const __mmask16 mask = TailMask(static_cast<int>(n - i));
    acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, a + i), _mm512_maskz_loadu_ps(mask, b + i),
                           acc1);
    i = n;
  }
  sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
#elif defined(__AVX2__) && defined(__FMA__)
  __m256 acc0 = _mm256_setzero_ps();
  __m256 acc1 = _mm256_setzero_ps();
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  if (i + 8 <= n) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    i += 8;
  }
  if (i < n) {
    const __m256i mask = TailMask8(static_cast<int>(n - i));
    acc1 = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, mask), _mm256_maskload_ps(b + i, mask), acc1);
    i = n;
  }
  sum = HorizontalSum(_mm256_add_ps(acc0, acc1));
#endif
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// y[i] += alpha * x[i] for i < n.
inline void Axpy(float* y, const float* x, float alpha, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 va = _mm512_set1_ps(alpha);
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  }
  if (i < n) {
    const __mmask16 mask = TailMask(static_cast<int>(n - i));
    _mm512_mask_storeu_ps(y + i, mask,
                          _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(mask, x + i),
                                          _mm512_maskz_loadu_ps(mask, y + i)));
    i = n;
  }
#endif
  for (; i < n; ++i) y[i] += alpha * x[i];
}

// max(x[0..n)), -inf for n == 0.
inline float Max(const float* x, int64_t n) {
  int64_t i = 0;
  float result = -INFINITY;
#if defined(__AVX512F__)
  __m512 acc = _mm512_set1_ps(-INFINITY);
  for (; i + 16 <= n; i += 16) acc = _mm512_max_ps(acc, _mm512_loadu_ps(x + i));
  if (i < n) {
    const __mmask16 mask = TailMask(static_cast<int>(n - i));
    acc = _mm512_mask_max_ps(acc, mask, acc, _mm512_maskz_loadu_ps(mask, x + i));
    i = n;
  }
  result = _mm512_reduce_max_ps(acc);
#elif defined(__AVX2__) && defined(__FMA__)
  __m256 acc = _mm256_set1_ps(-INFINITY);
  for (; i + 8 <= n; i += 8) acc = _mm256_max_ps(acc, _mm256_loadu_ps(x + i));
  result = HorizontalMax(acc);
#endif
  for (; i < n; ++i) result = result > x[i] ? result : x[i];
  return result;
}

// y[i] *= alpha for i < n.
inline void Scale(float* y, float alpha, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= alpha;
}

}  // namespace baton::kernels::internal
