// The int8-weight kernels for AVX512_BF16 CPUs. This file alone (with matmul_bf16_avx512.cc) is
// compiled with -mavx512bf16 (and BW/VL); its functions run only after CpuHasAvx512Bf16() said yes.
//
// The weights are widened in registers: 32 int8 values to two f32 vectors (exact), then to one
// vector of 32 bf16 (exact: |q| <= 128 needs 8 significant bits), which _mm512_dpbf16_ps multiplies
// with 32 bf16 activations. Per 32 weights that is 5 conversions and one dot-product instruction
// per activation row, where widening to f32 for FMAs costs 4 conversions and two FMAs per row: at
// 8 rows, 13 instructions against 20. A lone row is left to the FMA GEMV (matmul_cpu.cc), whose
// two accumulator chains per row beat one dpbf16 chain (`small`, batch 1, 1 thread: 212 against
// 140 tokens/s).
#include <algorithm>
#include <bit>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/vec_math.h"

namespace baton::kernels::internal {
namespace {

inline __m512bh LoadBf16(const uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }

// 32 int8 weights as 32 bf16, in order.
inline __m512bh WidenInt8(__m256i q) {
  const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q)));
  const __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)));
  return _mm512_cvtne2ps_pbh(hi, lo);  // the second operand fills the low half
}
inline __m512bh LoadInt8(const int8_t* p) {
  return WidenInt8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512bh LoadInt8(const int8_t* p, __mmask32 mask) {
  return WidenInt8(_mm256_maskz_loadu_epi8(mask, p));
}

// out[r, c] = a[r, :] . q[c, :] (no scale, no bias) for r < MA, c < NW: MA activation rows against
// NW weight rows side by side; every (r, c) sums its lanes in one order, whatever MA and NW are.
template <int MA, int NW>
void Tile(const uint16_t* a, int64_t a_stride, const int8_t* w, int k, float* out,
          int64_t out_stride) {
  static_assert(MA * NW <= 16);
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  int l = 0;
  for (; l + 32 <= k; l += 32) {
    __m512bh wv[NW];
    for (int c = 0; c < NW; ++c) wv[c] = LoadInt8(w + int64_t{c} * k + l);
    if constexpr (NW > 1) {
      // The next tile's rows at the same offset, into L2 (as the bf16 kernel's tiles do).
      for (int c = 0; c < NW; ++c) {
        _mm_prefetch(reinterpret_cast<const char*>(w + int64_t{c + NW} * k + l), _MM_HINT_T1);
      }
    }
    for (int r = 0; r < MA; ++r) {
      const __m512bh av = LoadBf16(a + r * a_stride + l);
      for (int c = 0; c < NW; ++c) acc[r * NW + c] = _mm512_dpbf16_ps(acc[r * NW + c], av, wv[c]);
    }
  }
  if (l < k) {
    const __mmask32 mask = static_cast<__mmask32>((uint64_t{1} << (k - l)) - 1);
    __m512bh wv[NW];
    for (int c = 0; c < NW; ++c) wv[c] = LoadInt8(w + int64_t{c} * k + l, mask);
    for (int r = 0; r < MA; ++r) {
      const __m512bh av = LoadBf16(a + r * a_stride + l);  // zero-padded past k
      for (int c = 0; c < NW; ++c) acc[r * NW + c] = _mm512_dpbf16_ps(acc[r * NW + c], av, wv[c]);
    }
  }
  alignas(64) float sums[16];
  _mm512_store_ps(sums, Reduce16(acc));
  for (int r = 0; r < MA; ++r) {
    for (int c = 0; c < NW; ++c) out[r * out_stride + c] = sums[r * NW + c];
  }
}

using TileFn = void (*)(const uint16_t*, int64_t, const int8_t*, int, float*, int64_t);

template <int MA>
TileFn PickTile(int nw) {
  switch (nw) {
    case 1: return Tile<MA, 1>;
    case 2: return Tile<MA, 2>;
    case 3: return Tile<MA, 3>;
    default: return Tile<MA, 4>;
  }
}

TileFn PickTile(int ma, int nw) {
  switch (ma) {
    case 1: return PickTile<1>(nw);
    case 2: return PickTile<2>(nw);
    case 3: return PickTile<3>(nw);
    default: return PickTile<4>(nw);
  }
}

}  // namespace

void MatmulInt8Avx512(const uint16_t* a, int64_t a_stride, const int8_t* w, float* out,
                      int64_t out_stride, int m, int n_begin, int n_end, int k) {
  // Tile-major, as the bf16 kernel's decode sizes: each group of 4 activation rows takes its turn
  // on a tile of 4 weight rows, read from memory once and then from L1. (Widening a few rows into
  // an L1 panel for the bf16 kernel instead, so each weight is widened once whatever m is, ran
  // slower: `small`, 1 thread, batch 8, 339 against 514 tokens/s.)
  for (int j = n_begin; j < n_end; j += 4) {
    const int nw = std::min(4, n_end - j);
    for (int i = 0; i < m; i += 4) {
      PickTile(std::min(4, m - i), nw)(a + i * a_stride, a_stride, w + int64_t{j} * k, k,
                                       out + i * out_stride + j, out_stride);
    }
  }
}

void WidenInt8ToBf16(const int8_t* q, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) _mm512_storeu_si512(out + i, (__m512i)LoadInt8(q + i));
  for (; i < n; ++i) out[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(float(q[i])) >> 16);
}

}  // namespace baton::kernels::internal
