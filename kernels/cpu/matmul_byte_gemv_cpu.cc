// The decode GEMV of the byte-per-weight formats, int8 (a scale per row) and fp8 E4M3 (a scale per
// row or per group of columns), and the fp8 panels' dequantization; matmul_cpu.cc picks between
// them and the other kernels. Weights stay a byte each and are widened in registers, never stored
// wider, except in the panels a prefill-sized product multiplies (DequantizeFp8Rows).
//
// The widening: int8 sign-extends and converts, exactly. For fp8, E4M3's seven magnitude bits,
// shifted left by 7 into a 16-bit lane, are an IEEE half whose value is the fp8 value times 2^-8,
// exactly, subnormals included (both formats put subnormals at exponent 0, and f16's exponent
// range covers E4M3's shifted by 8). So a byte becomes an f16 in three integer instructions and an
// f32 in F16C's vcvtph2ps, and the 2^8 is folded into the scales. One loop (ByteTile) is written
// over an Isa (AVX-512, AVX2 or scalar) and the weight's byte type (int8_t, or uint8_t for fp8).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "baton/kernels/matmul.h"
#include "kernels/common/dtype.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/vec_math.h"

namespace baton::kernels::internal {

namespace {

// fp8 value = (the f16 of Fp8AsF16Bits) * kF16Factor.
constexpr float kF16Factor = 256.0f;
// What the widened values are multiplied by to give the weights' values (before their scales):
// int8_t holds int8 weights, uint8_t fp8 codes.
template <typename W>
constexpr float WidenFactor() {
  return std::is_same_v<W, uint8_t> ? kF16Factor : 1.0f;
}

// The f16 bits standing for code * 2^-8: sign to bit 15, the magnitude's bits to 7-13. (Sign
// extension then a shift puts the sign in bits 14 and 15; the mask clears 14.) E4M3's NaN codes
// (0x7F, 0xFF) read as +-480 here: no quantizer writes them, and loaders refuse them.
constexpr uint16_t Fp8AsF16Bits(uint8_t code) {
  return static_cast<uint16_t>((static_cast<int16_t>(static_cast<int8_t>(code)) << 7) & 0xBFFF);
}

// Bytes ahead of each weight stream to prefetch, as the int4 GEMV (matmul_int4_tile.h): several
// rows read side by side are slower streams than one without it. A lone row reading 4 weight rows
// side by side this way beat the f32 GEMV's one row at a time: int8 on `small`, batch 1, went
// from 73-77 to 99-161 tok/s on one thread, 148 to 257-326 on two, when it moved here (a Xeon,
// benchmarks/README.md "fp8 weights").
constexpr int64_t kPrefetchBytes = 6144;

// One weight at a time: the twin every vector Isa must agree with.
struct PortableIsa {
  static constexpr int kLanes = 1;
  static constexpr int kTileCols = 1;
  using Vec = float;
  static Vec Zero() { return 0.0f; }
  static Vec LoadActivations(const float* a) { return *a; }
  static Vec LoadActivationsTail(const float* a, int) { return *a; }
  static Vec Widen(const uint8_t* w) { return F16ToF32(Fp8AsF16Bits(*w)); }
  static Vec Widen(const int8_t* w) { return static_cast<float>(*w); }
  template <typename W>
  static Vec WidenTail(const W* w, int) {
    return Widen(w);
  }
  static Vec Fma(Vec a, Vec w, Vec acc) { return acc + a * w; }
  static Vec Scaled(Vec acc, float scale, Vec total) { return total + acc * scale; }
  static float Reduce(Vec total) { return total; }
  static void Store(float* out, Vec v) { *out = v; }
};

#if defined(__AVX512F__)
#define BATON_BYTE_GEMV_SIMD 1
struct SimdIsa {
  static constexpr int kLanes = 16;
  // 4 x 3 tiles: 12 group accumulators + 12 totals + 3 weight vectors + 1 activation vector in
  // the 32 registers.
  static constexpr int kTileCols = 3;
  using Vec = __m512;
  static Vec Zero() { return _mm512_setzero_ps(); }
  static Vec LoadActivations(const float* a) { return _mm512_loadu_ps(a); }
  static Vec LoadActivationsTail(const float* a, int count) {
    return _mm512_maskz_loadu_ps(TailMask(count), a);
  }
  static Vec Widen(const uint8_t* w) {
    const __m256i codes =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
    return _mm512_cvtph_ps(
        _mm256_and_si256(_mm256_slli_epi16(codes, 7), _mm256_set1_epi16(static_cast<short>(0xBFFF))));
  }
  static Vec Widen(const int8_t* w) {
    return _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w))));
  }
  template <typename W>
  static Vec WidenTail(const W* w, int count) {
    W buffer[kLanes] = {};
    std::copy(w, w + count, buffer);
    return Widen(buffer);
  }
  static Vec Fma(Vec a, Vec w, Vec acc) { return _mm512_fmadd_ps(a, w, acc); }
  static Vec Scaled(Vec acc, float scale, Vec total) {
    return _mm512_fmadd_ps(acc, _mm512_set1_ps(scale), total);
  }
  static float Reduce(Vec total) { return _mm512_reduce_add_ps(total); }
  static void Store(float* out, Vec v) { _mm512_storeu_ps(out, v); }
};
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define BATON_BYTE_GEMV_SIMD 1
struct SimdIsa {
  static constexpr int kLanes = 8;
  static constexpr int kTileCols = 1;  // 16 registers: 4 accumulators + 4 totals per column
  using Vec = __m256;
  static Vec Zero() { return _mm256_setzero_ps(); }
  static Vec LoadActivations(const float* a) { return _mm256_loadu_ps(a); }
  static Vec LoadActivationsTail(const float* a, int count) {
    return _mm256_maskload_ps(a, TailMask8(count));
  }
  static Vec Widen(const uint8_t* w) {
    const __m128i codes = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w)));
    return _mm256_cvtph_ps(
        _mm_and_si128(_mm_slli_epi16(codes, 7), _mm_set1_epi16(static_cast<short>(0xBFFF))));
  }
  static Vec Widen(const int8_t* w) {
    return _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w))));
  }
  template <typename W>
  static Vec WidenTail(const W* w, int count) {
    W buffer[kLanes] = {};
    std::copy(w, w + count, buffer);
    return Widen(buffer);
  }
  static Vec Fma(Vec a, Vec w, Vec acc) { return _mm256_fmadd_ps(a, w, acc); }
  static Vec Scaled(Vec acc, float scale, Vec total) {
    return _mm256_fmadd_ps(acc, _mm256_set1_ps(scale), total);
  }
  static float Reduce(Vec v) {
    const __m128 sum4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 sum2 = _mm_add_ps(sum4, _mm_movehl_ps(sum4, sum4));
    return _mm_cvtss_f32(_mm_add_ss(sum2, _mm_movehdup_ps(sum2)));
  }
  static void Store(float* out, Vec v) { _mm256_storeu_ps(out, v); }
};
#endif

// out[row + r, j + c] for r < MA, c < NW: MA activation rows (`in`, rounded to bf16) against NW
// weight rows read side by side. Each (r, c) sums in one order whatever MA and NW are (lanes of
// one chain per group, scaled into a total, one reduce at the end), so a column's value never
// depends on the batch size or on the tile that computed it.
template <typename Isa, typename W, int MA, int NW>
void ByteTile(const MatmulParams& p, const float* in, int row, int j) {
  using Vec = typename Isa::Vec;
  const int k = p.k;
  const int g = p.weight_group_size > 0 ? p.weight_group_size : k;
  const int groups = k / g;
  const W* w[NW];
  const float* scales[NW];
  for (int c = 0; c < NW; ++c) {
    w[c] = static_cast<const W*>(p.weight) + int64_t{j + c} * k;
    scales[c] = p.weight_scales + int64_t{j + c} * groups;
  }
  Vec total[MA][NW];
  for (int r = 0; r < MA; ++r) {
    for (int c = 0; c < NW; ++c) total[r][c] = Isa::Zero();
  }
  for (int gi = 0; gi < groups; ++gi) {
    Vec acc[MA][NW];
    for (int r = 0; r < MA; ++r) {
      for (int c = 0; c < NW; ++c) acc[r][c] = Isa::Zero();
    }
    const int end = (gi + 1) * g;
    int l = gi * g;
    for (; l + Isa::kLanes <= end; l += Isa::kLanes) {
      Vec wv[NW];
      for (int c = 0; c < NW; ++c) {
        // Past the matrix's end this is a hint to a stray line, never a fault. (The builtin, not
        // _mm_prefetch: the portable Isa's build may have no x86 intrinsics.)
        __builtin_prefetch(w[c] + l + kPrefetchBytes, /*rw=*/0, /*locality=*/3);
        wv[c] = Isa::Widen(w[c] + l);
      }
      for (int r = 0; r < MA; ++r) {
        const Vec a = Isa::LoadActivations(in + int64_t{row + r} * k + l);
        for (int c = 0; c < NW; ++c) acc[r][c] = Isa::Fma(a, wv[c], acc[r][c]);
      }
    }
    if (l < end) {  // only a whole row (group size 0) of a length no multiple of the lanes
      Vec wv[NW];
      for (int c = 0; c < NW; ++c) wv[c] = Isa::WidenTail(w[c] + l, end - l);
      for (int r = 0; r < MA; ++r) {
        const Vec a = Isa::LoadActivationsTail(in + int64_t{row + r} * k + l, end - l);
        for (int c = 0; c < NW; ++c) acc[r][c] = Isa::Fma(a, wv[c], acc[r][c]);
      }
    }
    for (int c = 0; c < NW; ++c) {
      const float scale = scales[c][gi] * WidenFactor<W>();
      for (int r = 0; r < MA; ++r) total[r][c] = Isa::Scaled(acc[r][c], scale, total[r][c]);
    }
  }
  for (int c = 0; c < NW; ++c) {
    const float b = p.bias != nullptr ? p.bias[j + c] : 0.0f;
    for (int r = 0; r < MA; ++r) {
      p.out[int64_t{row + r} * p.n + j + c] = Isa::Reduce(total[r][c]) + b;
    }
  }
}

// Columns [j_begin, j_end) for activation rows [row, row + MA): NW columns at a time, then one.
template <typename Isa, typename W, int MA, int NW>
void ByteColumns(const MatmulParams& p, const float* in, int row, int j_begin, int j_end) {
  int j = j_begin;
  for (; j + NW <= j_end; j += NW) ByteTile<Isa, W, MA, NW>(p, in, row, j);
  for (; j < j_end; ++j) ByteTile<Isa, W, MA, 1>(p, in, row, j);
}

// Every row: groups of 4 activation rows against Isa::kTileCols weight rows at a time; the rows
// left (and a lone row, batch-1 decode) against several weight rows side by side.
template <typename Isa, typename W>
void ByteGemv(const MatmulParams& p, const float* in, int n_begin, int n_end) {
  int i = 0;
  for (; i + 4 <= p.m; i += 4) ByteColumns<Isa, W, 4, Isa::kTileCols>(p, in, i, n_begin, n_end);
  switch (p.m - i) {
    case 1: ByteColumns<Isa, W, 1, 4>(p, in, i, n_begin, n_end); break;
    case 2: ByteColumns<Isa, W, 2, 2>(p, in, i, n_begin, n_end); break;
    case 3: ByteColumns<Isa, W, 3, 2>(p, in, i, n_begin, n_end); break;
    default: break;
  }
}

template <typename Isa>
void ByteGemvOf(const MatmulParams& p, const float* in, int n_begin, int n_end) {
  if (p.weight_dtype == DType::kI8) {
    ByteGemv<Isa, int8_t>(p, in, n_begin, n_end);
  } else {
    ByteGemv<Isa, uint8_t>(p, in, n_begin, n_end);
  }
}

}  // namespace

void ByteGemvColumns(const MatmulParams& p, const float* rounded_in, int n_begin, int n_end,
                     bool simd) {
#if defined(BATON_BYTE_GEMV_SIMD)
  if (simd) {
    ByteGemvOf<SimdIsa>(p, rounded_in, n_begin, n_end);
    return;
  }
#endif
  (void)simd;
  ByteGemvOf<PortableIsa>(p, rounded_in, n_begin, n_end);
}

void DequantizeFp8Rows(const MatmulParams& p, int j_begin, int j_end, float* out) {
#if defined(BATON_BYTE_GEMV_SIMD)
  using Isa = SimdIsa;
#else
  using Isa = PortableIsa;
#endif
  const int g = p.weight_group_size > 0 ? p.weight_group_size : p.k;
  const int groups = p.k / g;
  for (int j = j_begin; j < j_end; ++j) {
    const auto* codes = static_cast<const uint8_t*>(p.weight) + int64_t{j} * p.k;
    float* dst = out + int64_t{j - j_begin} * p.k;
    for (int gi = 0; gi < groups; ++gi) {
      const float scale = p.weight_scales[int64_t{j} * groups + gi] * kF16Factor;
      int c = gi * g;
      const int end = c + g;
      for (; c + Isa::kLanes <= end; c += Isa::kLanes) {
        Isa::Store(dst + c, Isa::Scaled(Isa::Widen(codes + c), scale, Isa::Zero()));
      }
      for (; c < end; ++c) dst[c] = scale * F16ToF32(Fp8AsF16Bits(codes[c]));
    }
  }
}

}  // namespace baton::kernels::internal
