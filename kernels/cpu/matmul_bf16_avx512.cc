// The AVX512_BF16 matmul kernel. This file alone is compiled with -mavx512bf16 (and BW/VL); its
// functions run only after CpuHasAvx512Bf16() said yes.
//
// Dot-product formulation: both operands are k-contiguous, and _mm512_dpbf16_ps adds the products
// of adjacent bf16 pairs into 16 f32 lanes, so a micro-tile of MA activation rows x NW weight rows
// keeps MA*NW accumulators and reduces them once at the end with a 16x16 transpose-add. For m <= 2
// the weights are read one row at a time instead (StreamRows), a single long stream.
#include <algorithm>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/vec_math.h"

namespace baton::kernels::internal {

bool CpuHasAvx512Bf16() {
  return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
}

namespace {

inline __m512bh LoadBf16(const uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }
inline __m512bh LoadBf16(const uint16_t* p, __mmask32 mask) {
  return (__m512bh)_mm512_maskz_loadu_epi16(mask, p);
}

template <int MA, int NW>
void MicroTile(const uint16_t* a, int64_t a_stride, const uint16_t* w, int k, const float* bias,
               float* out, int64_t out_stride) {
  static_assert(MA * NW <= 16);
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  int l = 0;
  for (; l + 32 <= k; l += 32) {
    __m512bh wv[NW];
    for (int c = 0; c < NW; ++c) wv[c] = LoadBf16(w + int64_t{c} * k + l);
    // The next tile's rows at the same offset: one line per row stream, a tile ahead (the
    // hardware prefetchers do not keep up with NW short interleaved streams). Into L2: see the
    // f32 GEMV tile in matmul_cpu.cc for what prefetching into L1 cost.
    for (int c = 0; c < NW; ++c) {
      _mm_prefetch(reinterpret_cast<const char*>(w + int64_t{c + NW} * k + l), _MM_HINT_T1);
    }
    for (int r = 0; r < MA; ++r) {
      const __m512bh av = LoadBf16(a + r * a_stride + l);
      for (int c = 0; c < NW; ++c) acc[r * NW + c] = _mm512_dpbf16_ps(acc[r * NW + c], av, wv[c]);
    }
  }
  if (l < k) {
    const __mmask32 mask = static_cast<__mmask32>((uint64_t{1} << (k - l)) - 1);
    __m512bh wv[NW];
    for (int c = 0; c < NW; ++c) wv[c] = LoadBf16(w + int64_t{c} * k + l, mask);
    for (int r = 0; r < MA; ++r) {
      const __m512bh av = LoadBf16(a + r * a_stride + l);  // zero-padded past k
      for (int c = 0; c < NW; ++c) acc[r * NW + c] = _mm512_dpbf16_ps(acc[r * NW + c], av, wv[c]);
    }
  }
  alignas(64) float sums[16];
  _mm512_store_ps(sums, Reduce16(acc));
  for (int r = 0; r < MA; ++r) {
    for (int c = 0; c < NW; ++c) {
      out[r * out_stride + c] = sums[r * NW + c] + (bias != nullptr ? bias[c] : 0.0f);
    }
  }
}

// GEMV regime (m <= kStreamMaxRows): one weight row at a time, start to end, so the weights are a
// single sequential stream the hardware prefetchers follow at full bandwidth (side-by-side rows
// are many short streams and measured far slower).
template <int MA>
void StreamRows(const uint16_t* a, int64_t a_stride, const uint16_t* w, int k, const float* bias,
                float* out, int64_t out_stride, int n_begin, int n_end) {
  const __mmask32 tail = static_cast<__mmask32>((uint64_t{1} << (k % 32)) - 1);
  for (int j = n_begin; j < n_end; ++j) {
    const uint16_t* row = w + int64_t{j} * k;
    __m512 acc0[MA], acc1[MA];
    for (int r = 0; r < MA; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
    int l = 0;
    for (; l + 64 <= k; l += 64) {
      const __m512bh w0 = LoadBf16(row + l);
      const __m512bh w1 = LoadBf16(row + l + 32);
      for (int r = 0; r < MA; ++r) {
        acc0[r] = _mm512_dpbf16_ps(acc0[r], LoadBf16(a + r * a_stride + l), w0);
        acc1[r] = _mm512_dpbf16_ps(acc1[r], LoadBf16(a + r * a_stride + l + 32), w1);
      }
    }
    if (l + 32 <= k) {
      const __m512bh w0 = LoadBf16(row + l);
      for (int r = 0; r < MA; ++r) acc0[r] = _mm512_dpbf16_ps(acc0[r], LoadBf16(a + r * a_stride + l), w0);
      l += 32;
    }
    if (l < k) {
      const __m512bh w1 = LoadBf16(row + l, tail);
      for (int r = 0; r < MA; ++r) {
        acc1[r] = _mm512_dpbf16_ps(acc1[r], LoadBf16(a + r * a_stride + l), w1);  // zero-padded
      }
    }
    const float b = bias != nullptr ? bias[j] : 0.0f;
    for (int r = 0; r < MA; ++r) {
      out[r * out_stride + j] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r])) + b;
    }
  }
}

// StreamRows loads every activation row again for each weight row, so past 2 rows its loads, not
// the weight stream, set the pace: on Zen 5 (2 threads, small bf16) a decode step of 3 / 4
// sequences took 5.3 / 6.9 ms with it and 4.0 / 4.1 ms tile-major, where 1 and 2 were alike.
constexpr int kStreamMaxRows = 2;
// Up to here (decode batches) the tiles go tile-major (see MatmulBf16Avx512), past it in panels.
constexpr int kTileMajorMaxRows = 64;

using TileFn = void (*)(const uint16_t*, int64_t, const uint16_t*, int, const float*, float*,
                        int64_t);

template <int MA>
TileFn PickTile(int nw) {
  switch (nw) {
    case 1: return MicroTile<MA, 1>;
    case 2: return MicroTile<MA, 2>;
    case 3: return MicroTile<MA, 3>;
    default: return MicroTile<MA, 4>;
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

void MatmulBf16Avx512(const uint16_t* a, int64_t a_stride, const uint16_t* w, const float* bias,
                      float* out, int64_t out_stride, int m, int n_begin, int n_end, int k) {
  if (m <= kStreamMaxRows) {
    static_assert(kStreamMaxRows == 2, "one StreamRows instance per row count");
    if (m == 1) {
      StreamRows<1>(a, a_stride, w, k, bias, out, out_stride, n_begin, n_end);
    } else {
      StreamRows<2>(a, a_stride, w, k, bias, out, out_stride, n_begin, n_end);
    }
    return;
  }
  if (m <= kTileMajorMaxRows) {
    // Every group of 4 activation rows takes its turn on one tile of 4 weight rows before the
    // next tile: the tile is read from memory once, then from L1, and the reads of the next tile
    // (prefetched) overlap the products of all the groups. The panels below read a panel from
    // memory with the first row group and then ran the others from L2 with no memory traffic.
    for (int j = n_begin; j < n_end; j += 4) {
      const int nw = std::min(4, n_end - j);
      for (int i = 0; i < m; i += 4) {
        PickTile(std::min(4, m - i), nw)(a + i * a_stride, a_stride, w + int64_t{j} * k, k,
                                         bias != nullptr ? bias + j : nullptr,
                                         out + i * out_stride + j, out_stride);
      }
    }
    return;
  }
  // Weight rows in L2-sized panels; activation rows in blocks that stay in L2 with the panel.
  const int panel_rows = std::max(8, static_cast<int>((192 * 1024) / (2 * int64_t{k})) / 8 * 8);
  constexpr int kRowBlock = 64;
  for (int n0 = n_begin; n0 < n_end; n0 += panel_rows) {
    const int n1 = std::min(n_end, n0 + panel_rows);
    for (int i0 = 0; i0 < m; i0 += kRowBlock) {
      const int i1 = std::min(m, i0 + kRowBlock);
      for (int i = i0; i < i1; i += 4) {
        const int ma = std::min(4, i1 - i);
        int j = n0;
        for (; j < n1; j += 4) {
          PickTile(ma, std::min(4, n1 - j))(a + i * a_stride, a_stride, w + int64_t{j} * k, k,
                                            bias != nullptr ? bias + j : nullptr,
                                            out + i * out_stride + j, out_stride);
        }
      }
    }
  }
}

}  // namespace baton::kernels::internal
