// The int8- and fp8-weight kernels for AVX512_BF16 CPUs. This file alone (with
// matmul_bf16_avx512.cc) is compiled with -mavx512bf16 (and BW/VL); its functions run only after
// CpuHasAvx512Bf16() said yes.
//
// The weights are widened in registers: 32 int8 values to two f32 vectors (exact), then to one
// vector of 32 bf16 (exact: |q| <= 128 needs 8 significant bits), which _mm512_dpbf16_ps multiplies
// with 32 bf16 activations. fp8 E4M3 codes take the same route through f16
// (matmul_byte_gemv_cpu.cc says why the shifted bits are the value times 2^-8), then f32 and bf16,
// all exact. Per 32 weights that is 5 conversions and one dot-product instruction per activation
// row, where widening to f32 for FMAs costs 4 conversions and two FMAs per row: at 8 rows, 13
// instructions against 20. A lone row is left to the FMA GEMV (now matmul_byte_gemv_cpu.cc's),
// which read faster there (`small`, batch 1, 1 thread, tokens/s: FMA GEMV 178-212, dpbf16 with
// one accumulator chain 140, with two 150).
#include <algorithm>
#include <bit>
#include <utility>

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
inline __m512bh LoadWeights(const int8_t* p) {
  return WidenInt8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512bh LoadWeights(const int8_t* p, __mmask32 mask) {
  return WidenInt8(_mm256_maskz_loadu_epi8(mask, p));
}

// 32 fp8 E4M3 codes as 32 bf16 of their values times 2^-8, in order.
inline __m512bh WidenFp8(__m256i codes) {
  const __m512i halves = _mm512_and_si512(_mm512_slli_epi16(_mm512_cvtepi8_epi16(codes), 7),
                                          _mm512_set1_epi16(static_cast<short>(0xBFFF)));
  const __m512 lo = _mm512_cvtph_ps(_mm512_castsi512_si256(halves));
  const __m512 hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(halves, 1));
  return _mm512_cvtne2ps_pbh(hi, lo);
}
inline __m512bh LoadWeights(const uint8_t* p) {
  return WidenFp8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512bh LoadWeights(const uint8_t* p, __mmask32 mask) {
  return WidenFp8(_mm256_maskz_loadu_epi8(mask, p));
}

// out[r, c] = a[r, :] . q[c, :] (no scale, no bias) for r < MA, c < NW: MA activation rows against
// NW weight rows side by side; every (r, c) sums its lanes in one order, whatever MA and NW are.
// W is int8_t (int8 weights) or uint8_t (fp8 codes, summed as their values times 2^-8).
template <int MA, int NW, typename W>
void Tile(const uint16_t* a, int64_t a_stride, const W* w, int k, float* out,
          int64_t out_stride) {
  static_assert(MA * NW <= 16);
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  int l = 0;
  for (; l + 32 <= k; l += 32) {
    __m512bh wv[NW];
    for (int c = 0; c < NW; ++c) wv[c] = LoadWeights(w + int64_t{c} * k + l);
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
    for (int c = 0; c < NW; ++c) wv[c] = LoadWeights(w + int64_t{c} * k + l, mask);
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

template <typename W>
using TileFn = void (*)(const uint16_t*, int64_t, const W*, int, float*, int64_t);

// How many weight rows a tile of `ma` activation rows reads side by side within 16 accumulators:
// the rows of a decode batch share one tile (up to kMaxGroupRows), so each weight is widened once
// per group, beside as many weight rows as fit.
constexpr int kMaxGroupRows = 8;
constexpr int TileWeightRows(int ma) { return ma <= 4 ? 4 : 2; }

template <typename W, int... MAs>
TileFn<W> PickTile(int ma, int nw, std::integer_sequence<int, MAs...>) {
  static_assert(sizeof...(MAs) == kMaxGroupRows);
  static constexpr TileFn<W> kWide[] = {Tile<MAs + 1, TileWeightRows(MAs + 1), W>...};
  static constexpr TileFn<W> kOne[] = {Tile<MAs + 1, 1, W>...};
  return nw == 1 ? kOne[ma - 1] : kWide[ma - 1];
}

// Tile<ma, nw> for ma in [1, kMaxGroupRows] and nw either TileWeightRows(ma) or 1.
template <typename W>
TileFn<W> PickTile(int ma, int nw) {
  return PickTile<W>(ma, nw, std::make_integer_sequence<int, kMaxGroupRows>());
}

template <typename W>
void ByteWeightsAvx512(const uint16_t* a, int64_t a_stride, const W* w, float* out,
                       int64_t out_stride, int m, int n_begin, int n_end, int k) {
  // Activation rows in groups of at most kMaxGroupRows, each group passing over the weights tile
  // by tile; the weight rows left past the last whole tile go one at a time. `small`, 1 thread,
  // tokens/s at batch 4 / 8 / 16: tiles of 4 x 4 for any m (each weight widened once per 4 rows)
  // 452 / 487 / -, groups of up to 16 rows (16 x 1 tiles above 8) - / 518 / 292.
  for (int i = 0; i < m; i += kMaxGroupRows) {
    const int ma = std::min(kMaxGroupRows, m - i);
    const int nw = TileWeightRows(ma);
    const TileFn<W> wide = PickTile<W>(ma, nw);
    const TileFn<W> one = PickTile<W>(ma, 1);
    int j = n_begin;
    for (; j + nw <= n_end; j += nw) {
      wide(a + i * a_stride, a_stride, w + int64_t{j} * k, k, out + i * out_stride + j, out_stride);
    }
    for (; j < n_end; ++j) {
      one(a + i * a_stride, a_stride, w + int64_t{j} * k, k, out + i * out_stride + j, out_stride);
    }
  }
}

}  // namespace

void MatmulInt8Avx512(const uint16_t* a, int64_t a_stride, const int8_t* w, float* out,
                      int64_t out_stride, int m, int n_begin, int n_end, int k) {
  ByteWeightsAvx512(a, a_stride, w, out, out_stride, m, n_begin, n_end, k);
}

void MatmulFp8Avx512(const uint16_t* a, int64_t a_stride, const uint8_t* w, float* out,
                     int64_t out_stride, int m, int n_begin, int n_end, int k) {
  ByteWeightsAvx512(a, a_stride, w, out, out_stride, m, n_begin, n_end, k);
}

void WidenFp8ToBf16(const uint8_t* codes, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) _mm512_storeu_si512(out + i, (__m512i)LoadWeights(codes + i));
  if (i < n) {
    const __mmask32 mask = static_cast<__mmask32>((uint64_t{1} << (n - i)) - 1);
    _mm512_mask_storeu_epi16(out + i, mask, (__m512i)LoadWeights(codes + i, mask));
  }
}

void WidenInt8ToBf16(const int8_t* q, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) _mm512_storeu_si512(out + i, (__m512i)LoadWeights(q + i));
  for (; i < n; ++i) out[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(float(q[i])) >> 16);
}

}  // namespace baton::kernels::internal
