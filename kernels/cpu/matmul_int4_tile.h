// The int4 GEMV's loop (matmul_int4_cpu.cc, matmul_int4_vnni.cc), written once over an `Isa` that
// supplies its registers: each translation unit instantiates it with its own instructions, inside
// an anonymous namespace (internal linkage, so one compiled for AVX512_VNNI never stands in for
// another).
//
// Decode-sized products take int8 activations, one scale per row and weight group (llama.cpp's
// Q8_0 scheme at the weights' group size): the products of nibbles and int8 activations sum
// exactly in int32 over a group, then
//   out[i, j] = sum_g scale[j, g] * d[i, g] * dot[i, j, g]  -  sum_g scale[j, g] * zero[j, g] *
//               sums[i, g] + bias[j]
// with sums[i, g] = d[i, g] * (the group's sum of int8 activations): what the dequantized weights
// times the dequantized activations give.
//
// An Isa provides:
//   Weights Unpack(const uint8_t* block)       the 32 nibbles of a block's 16 bytes, columns in order;
//   Acc Zero()                                 an int32 accumulator of 0;
//   Acc Dot(Acc, const Weights&, const int8_t*) plus the block's nibbles times 32 activations;
//   Sum SumZero()                              an f32 accumulator of 0;
//   Sum Scaled(Acc, float scale, Sum)          plus the accumulator's lanes times scale;
//   float Reduce(Sum)                          the accumulator's lanes summed;
//   kGroupColumns                              weight rows a group of 4 activation rows takes at
//                                              once (2 needs 8 + 8 accumulators: 32 registers).
#pragma once

#include <cstdint>

#include "baton/kernels/matmul.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/simd.h"

namespace baton::kernels::internal {
namespace {

inline constexpr int64_t kInt4PrefetchBytes = 6144;

#if defined(__AVX2__)
// A block's 32 nibbles as 32 bytes, columns in order: the low nibbles are columns 0-15, the high
// ones 16-31 (matmul.h's order).
inline __m256i UnpackInt4Block(const uint8_t* block) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block));
  const __m128i mask = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), mask), _mm_and_si128(bytes, mask));
}

// The parts of an Isa on 256-bit registers that do not depend on how it multiplies (the AVX2 and
// AVX512_VNNI Isas add Dot and kGroupColumns).
struct Int4YmmIsa {
  using Weights = __m256i;
  using Acc = __m256i;
  using Sum = __m256;
  static Weights Unpack(const uint8_t* block) { return UnpackInt4Block(block); }
  static Acc Zero() { return _mm256_setzero_si256(); }
  static Sum SumZero() { return _mm256_setzero_ps(); }
  static Sum Scaled(Acc acc, float scale, Sum total) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(scale), total);
  }
  static float Reduce(Sum v) {
    const __m128 sum4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 sum2 = _mm_add_ps(sum4, _mm_movehl_ps(sum4, sum4));
    return _mm_cvtss_f32(_mm_add_ss(sum2, _mm_movehdup_ps(sum2)));
  }
};
#endif

// out[row + r, j + c] for r < MA, c < NW: MA activation rows against NW weight rows. Each block of
// a weight row is unpacked once for the MA rows and each block of activations loaded once for the
// NW columns; the MA x NW accumulators are independent chains, so a lone activation row (decode
// at batch 1) still keeps several dot products in flight.
template <typename Isa, int MA, int NW>
void Int4Tile(const MatmulParams& p, const Int4Activations& a, int row, int j) {
  const int g = p.weight_group_size;
  const int64_t groups = p.k / g;
  const uint8_t* bytes[NW];
  const float* scales[NW];
  const float* zeros[NW];
  for (int c = 0; c < NW; ++c) {
    bytes[c] = static_cast<const uint8_t*>(p.weight) + int64_t{j + c} * (p.k / 2);
    scales[c] = p.weight_scales + (j + c) * groups;
    zeros[c] = p.weight_zeros != nullptr ? p.weight_zeros + (j + c) * groups : nullptr;
  }
  typename Isa::Sum total[MA][NW];
  float zero_terms[MA][NW] = {};
  for (int r = 0; r < MA; ++r) {
    for (int c = 0; c < NW; ++c) total[r][c] = Isa::SumZero();
  }
  for (int64_t gi = 0; gi < groups; ++gi) {
    typename Isa::Acc acc[MA][NW];
    for (int r = 0; r < MA; ++r) {
      for (int c = 0; c < NW; ++c) acc[r][c] = Isa::Zero();
    }
    for (int64_t l = gi * g; l < (gi + 1) * g; l += kInt4ColumnBlock) {
      typename Isa::Weights w[NW];
      for (int c = 0; c < NW; ++c) {
        // The rows kInt4PrefetchBytes further on, at the same offset: without it the NW
        // side-by-side streams read at 12 GB/s where one stream gets 20 (32000 x 768, batch 1, one
        // thread, Zen 4; 1.5 KiB ahead 16.5, 3 KiB 17.3, 6 KiB 19, 12 KiB 16). Past the matrix's
        // end this is a hint to a stray line, never a fault.
        // (The builtin, not _mm_prefetch: the portable Isa's build may have no x86 intrinsics.)
        __builtin_prefetch(bytes[c] + l / 2 + kInt4PrefetchBytes, /*rw=*/0, /*locality=*/3);
        w[c] = Isa::Unpack(bytes[c] + l / 2);
      }
      for (int r = 0; r < MA; ++r) {
        const int8_t* act = a.q + (row + r) * int64_t{p.k} + l;
        for (int c = 0; c < NW; ++c) acc[r][c] = Isa::Dot(acc[r][c], w[c], act);
      }
    }
    for (int r = 0; r < MA; ++r) {
      const int64_t ag = (row + r) * groups + gi;
      for (int c = 0; c < NW; ++c) {
        const float scale = scales[c][gi];
        const float zero = zeros[c] != nullptr ? zeros[c][gi] : 8.0f;
        total[r][c] = Isa::Scaled(acc[r][c], scale * a.scales[ag], total[r][c]);
        zero_terms[r][c] += zero * scale * a.sums[ag];
      }
    }
  }
  for (int c = 0; c < NW; ++c) {
    const float b = p.bias != nullptr ? p.bias[j + c] : 0.0f;
    for (int r = 0; r < MA; ++r) {
      p.out[(row + r) * int64_t{p.n} + j + c] = Isa::Reduce(total[r][c]) - zero_terms[r][c] + b;
    }
  }
}

// Columns [j_begin, j_end) for activation rows [row, row + MA): NW columns at a time, then one.
template <typename Isa, int MA, int NW>
void Int4Columns(const MatmulParams& p, const Int4Activations& a, int row, int j_begin, int j_end) {
  int j = j_begin;
  for (; j + NW <= j_end; j += NW) Int4Tile<Isa, MA, NW>(p, a, row, j);
  for (; j < j_end; ++j) Int4Tile<Isa, MA, 1>(p, a, row, j);
}

// Columns [n_begin, n_end) for every row: groups of 4 activation rows against Isa::kGroupColumns
// weight rows at a time, the rows left (and a lone row) against several weight rows side by side.
template <typename Isa>
void Int4Gemv(const MatmulParams& p, const Int4Activations& a, int n_begin, int n_end) {
  int i = 0;
  for (; i + 4 <= p.m; i += 4) Int4Columns<Isa, 4, Isa::kGroupColumns>(p, a, i, n_begin, n_end);
  switch (p.m - i) {
    case 1: Int4Columns<Isa, 1, 4>(p, a, i, n_begin, n_end); break;
    case 2: Int4Columns<Isa, 2, 2>(p, a, i, n_begin, n_end); break;
    case 3: Int4Columns<Isa, 3, 2>(p, a, i, n_begin, n_end); break;
    default: break;
  }
}

}  // namespace
}  // namespace baton::kernels::internal
