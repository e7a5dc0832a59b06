// MatmulCpu: picks a kernel by weight dtype and m.
//   f32, m <= kF32GemvMaxRows (64 on AVX-512, 16 on AVX2): a SIMD dot-product kernel (AVX-512, or
//     AVX2 + FMA) that streams each weight row once past row groups of activation rows (decode
//     batches), columns split over the pool; on AVX2 a lone activation row reads long weight rows
//     four at a time.
//     Builds with neither: the same loop order with a plain dot product per (row, column).
//   f32, larger m: OpenBLAS sgemm, columns split over the pool, OpenBLAS itself single-threaded.
//   bf16: activations rounded to bf16 once, then the AVX512_BF16 kernel (matmul_bf16_avx512.cc)
//     or, on CPUs without it, the same rounding of the activations and f32 arithmetic: the AVX2
//     GEMV widening bf16 weights on the fly for small m, widened weight panels through sgemm for
//     large m.
//   int8: bf16's scheme with the integers widened exactly (in registers for small m: the byte GEMV
//     of matmul_byte_gemv_cpu.cc, or dpbf16 tiles for batches on AVX512_BF16 CPUs; to bf16 panels
//     for the AVX512_BF16 kernel, or to f32 panels for sgemm, for large m), then each column
//     times its scale.
//   int4: for small m, activations quantized to int8 per group and an integer GEMV unpacking the
//     nibbles in registers (AVX512_VNNI, AVX2 or scalar; matmul_int4_cpu.cc); for large m,
//     activations rounded to bf16 and dequantized panels into the bf16 kernel or sgemm.
//   fp8: int8's decode scheme with the codes widened exactly through F16C (the byte GEMV, with a
//     scale per group or row; dpbf16 tiles for batches of per-row-scaled weights); for large m,
//     int4's dequantized panels.
//   f16: no x86 instruction we use multiplies f16 pairs into f32 (AVX512_FP16 accumulates in f16),
//     so always bf16's second scheme: activations rounded to f16 once, then the GEMV (AVX-512 or
//     AVX2) widening the f16 weights with F16C as they stream past for small m, widened panels
//     into sgemm for large m. MatmulF16Portable is the same with scalar conversions.
// MatmulGroupCpu runs several products of one input as one pass over the pool when m is small.
#include <cblas.h>

#include <algorithm>
#include <mutex>
#include <type_traits>
#include <vector>

#include "absl/types/span.h"
#include "baton/kernels/matmul.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vec_math.h"

namespace baton::kernels {

namespace {

// Up to here the streaming kernel beats OpenBLAS, whose packing of the weights costs as much as
// reading them when m is small (matmul_bench at n = 32000, k = 768, one thread: m = 8 12.4 vs 17.9 ms,
// m = 16 19.0 vs 21.5 ms, m = 32 29.6 vs 27.9 ms).
constexpr int kStreamMaxRows = 16;
constexpr int kColumnBlock = 16;  // columns per parallel chunk

// OpenBLAS would start its own threads on top of our pool; the pool provides the parallelism.
void MakeOpenBlasSingleThreaded() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

// Calls fn(n_begin, n_end) over column ranges that are multiples of kColumnBlock.
template <typename Fn>
void ForColumnRanges(ThreadPool* pool, int n, int64_t work_per_column, Fn&& fn) {
  const int64_t num_chunks = (n + kColumnBlock - 1) / kColumnBlock;
  internal::ParallelChunks(pool, num_chunks, work_per_column * kColumnBlock,
                           [&](int64_t begin, int64_t end, int) {
                             fn(static_cast<int>(begin * kColumnBlock),
                                static_cast<int>(std::min<int64_t>(n, end * kColumnBlock)));
                           });
}

#if defined(__AVX512F__)
#define BATON_SIMD_GEMV 1
// f16 weights go through the GEMV too: vcvtph2ps (16 halves to 16 floats, exact) is AVX512F.
#define BATON_SIMD_GEMV_F16 1
// Activation rows per pass over a block of weight rows: a tile of 4 rows x kGemvTileCols weight rows
// keeps 24 accumulators + 3 weight vectors + 1 activation vector in the 32 registers.
constexpr int kGemvRowGroup = 4;
constexpr int kGemvTileCols = 3;
// f32 products up to this m take the GEMV rather than OpenBLAS: once its tiles kept their operands
// in registers it beat sgemm well past decode sizes (matmul_bench, 32000 x 768, one thread,
// interleaved: m = 32 1.48x, m = 64 1.17-1.21x; at m = 512, 2048 x 768, sgemm is 1.27x faster).
constexpr int kF32GemvMaxRows = 64;

// 16 weights as f32: f32 loads as is, f16 widens through vcvtph2ps.
inline __m512 LoadWeights16(const float* w) { return _mm512_loadu_ps(w); }
inline __m512 LoadWeights16(const HalfFloat* w) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)));
}
// The first `count` (< 16) weights, the other lanes 0. A masked 16-bit load would need AVX512BW;
// a tail is once per row, so f16 goes through a zeroed copy instead.
inline __m512 LoadWeightsTail16(const float* w, int count) {
  return _mm512_maskz_loadu_ps(internal::TailMask(count), w);
}
inline __m512 LoadWeightsTail16(const HalfFloat* w, int count) {
  HalfFloat buffer[16] = {};
  std::copy(w, w + count, buffer);
  return LoadWeights16(buffer);
}
// int8 widens exactly: sign-extend 16 bytes to 32-bit lanes, then convert.
inline __m512 LoadWeights16(const int8_t* w) {
  return _mm512_cvtepi32_ps(
      _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w))));
}
inline __m512 LoadWeightsTail16(const int8_t* w, int count) {
  int8_t buffer[16] = {};
  std::copy(w, w + count, buffer);
  return LoadWeights16(buffer);
}

// out[r, j + c] = in[r, :] . w[j + c, :] (+ bias) for r < MA, c < NW: MA activation rows against NW
// weight rows read side by side. Every (r, c) sums in one order whatever MA and NW are (two chains
// over alternate 16-lane chunks, the tail on the second, then one reduce_add), so a column's value
// never depends on the batch size or on the tile that computed it.
//
// A decode batch of m rows reading one weight row at a time (the MA x 1 tile) loads m activation
// vectors per weight vector: at m = 8 that is 9 loads per 8 FMAs, and `small` f32 decode at batch 8
// ran at a quarter of the read bandwidth. A 4 x 3 tile loads 7 vectors per 12 FMAs.
template <int MA, int NW, typename W>
void GemvTile(const float* in, const W* weight, const float* bias, float* out, int64_t out_stride,
              int k, int j) {
  const W* w = weight + int64_t{j} * k;
  __m512 acc0[MA][NW], acc1[MA][NW];
  for (int r = 0; r < MA; ++r) {
    for (int c = 0; c < NW; ++c) acc0[r][c] = acc1[r][c] = _mm512_setzero_ps();
  }
  // acc[r][c] += in[r, l .. l+16) * w[c, l .. l+16) for every r, c.
  auto step = [&](__m512 (&acc)[MA][NW], int l) {
    if constexpr (MA > 1) {
      // The next tile's rows at the same offset, one line per row: without it the demand misses
      // of NW streams, each line waiting behind MA FMAs, read at 5-6 GB/s (perf: the stalls sit
      // on each line's first load). Into L2, not L1: prefetcht0 stalled on the L1's few miss
      // buffers (perf: the samples sat on the prefetches) and m = 8 ran 1.48x slower (32000 x
      // 768, interleaved A/B; 2 tiles ahead instead of 1 changed nothing). Past the matrix's end
      // this is a hint to a stray line, never a fault.
      for (int c = 0; c < NW; ++c) {
        _mm_prefetch(reinterpret_cast<const char*>(w + int64_t{c + NW} * k + l), _MM_HINT_T1);
      }
    }
    __m512 wv[NW];
    // The empty asm statements pin each loaded vector to a register. Without them GCC folds either
    // the weight or the activation loads into the FMAs as memory operands, one load per FMA: 15-16
    // loads per 12 FMAs in the 4 x 3 tile instead of 7.
    for (int c = 0; c < NW; ++c) {
      wv[c] = LoadWeights16(w + int64_t{c} * k + l);
      if constexpr (MA > 1) asm("" : "+v"(wv[c]));
    }
    for (int r = 0; r < MA; ++r) {
      __m512 a = _mm512_loadu_ps(in + int64_t{r} * k + l);
      if constexpr (NW > 1) asm("" : "+v"(a));
      for (int c = 0; c < NW; ++c) acc[r][c] = _mm512_fmadd_ps(a, wv[c], acc[r][c]);
    }
  };
  int l = 0;
  for (; l + 32 <= k; l += 32) {
    step(acc0, l);
    step(acc1, l + 16);
  }
  if (l + 16 <= k) {
    step(acc0, l);
    l += 16;
  }
  if (l < k) {
    const __mmask16 tail = internal::TailMask(k - l);
    __m512 wv[NW];
    for (int c = 0; c < NW; ++c) wv[c] = LoadWeightsTail16(w + int64_t{c} * k + l, k - l);
    for (int r = 0; r < MA; ++r) {
      const __m512 a = _mm512_maskz_loadu_ps(tail, in + int64_t{r} * k + l);
      for (int c = 0; c < NW; ++c) acc1[r][c] = _mm512_fmadd_ps(a, wv[c], acc1[r][c]);
    }
  }
  for (int c = 0; c < NW; ++c) {
    const float b = bias != nullptr ? bias[j + c] : 0.0f;
    for (int r = 0; r < MA; ++r) {
      out[r * out_stride + j + c] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r][c], acc1[r][c])) + b;
    }
  }
}

// GemvTile<MA, NW> at columns [j, j + NW) for every row of `in` ([m, k]): groups of kGemvRowGroup
// rows, then the rows left.
template <int NW, typename W>
void GemvAllRows(const float* in, int m, const W* weight, const float* bias, float* out,
                 int64_t out_stride, int k, int j) {
  static_assert(kGemvRowGroup == 4, "the switch below covers the rows left by groups of 4");
  int i = 0;
  for (; i + kGemvRowGroup <= m; i += kGemvRowGroup) {
    GemvTile<kGemvRowGroup, NW>(in + int64_t{i} * k, weight, bias, out + i * out_stride, out_stride,
                                k, j);
  }
  const float* in_rest = in + int64_t{i} * k;
  float* out_rest = out + i * out_stride;
  switch (m - i) {
    case 1: GemvTile<1, NW>(in_rest, weight, bias, out_rest, out_stride, k, j); break;
    case 2: GemvTile<2, NW>(in_rest, weight, bias, out_rest, out_stride, k, j); break;
    case 3: GemvTile<3, NW>(in_rest, weight, bias, out_rest, out_stride, k, j); break;
    default: break;
  }
}

// out[:, n_begin:n_end] for every row of `in` ([m, k]).
//
// A lone activation row (batch-1 decode) reads one weight row at a time, start to end: the weights
// are then a single sequential stream, which the hardware prefetchers follow at full read
// bandwidth (tiles of several weight rows side by side measured ~35% slower on Zen 4 there, when
// the weights were on 4 KiB pages). Several activation rows are bound by loads instead, and read
// kGemvTileCols weight rows side by side.
//
// Every row group takes its turn on one tile of weight rows before the next tile, so a tile is
// read from memory once and then from L1, and the memory reads (the next tile, prefetched) overlap
// the FMAs of all the groups. Passing a 256 KiB block of weight rows per group instead (the AVX2
// scheme below) read the block from memory with the first group, then ran the other groups from L2
// with no memory traffic at all: at m = 8 the time was the sum of a memory-bound and a
// compute-bound pass.
template <typename W>
void Gemv(const float* in, int m, const W* weight, const float* bias, float* out, int64_t out_stride,
          int k, int n_begin, int n_end) {
  int j = n_begin;
  if (m > 1) {
    for (; j + kGemvTileCols <= n_end; j += kGemvTileCols) {
      GemvAllRows<kGemvTileCols>(in, m, weight, bias, out, out_stride, k, j);
    }
  }
  for (; j < n_end; ++j) GemvAllRows<1>(in, m, weight, bias, out, out_stride, k, j);
}

#elif defined(__AVX2__) && defined(__FMA__)
#define BATON_SIMD_GEMV 1
#if defined(__F16C__)  // every AVX2 CPU has it, but the compiler flags decide
#define BATON_SIMD_GEMV_F16 1
#endif
// 12 accumulators + 2 weight vectors in the 16 registers. Reading each weight row once per 6
// activation rows instead of once per 4 measured 1.02-1.17x at m = 8 and 16 (interleaved A/B, Zen 3).
constexpr int kGemvRowGroup = 6;
// f32 products up to this m take the GEMV rather than OpenBLAS (measured on Zen 3, see
// kStreamMaxRows).
constexpr int kF32GemvMaxRows = kStreamMaxRows;

// 8 weights as f32: f32 loads as is; bf16 (uint16_t) is the high half of an f32, so widen and
// shift; f16 (HalfFloat) widens through F16C's vcvtph2ps.
inline __m256 LoadWeights8(const float* w) { return _mm256_loadu_ps(w); }
inline __m256 LoadWeights8(const uint16_t* w) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}
#if defined(BATON_SIMD_GEMV_F16)
inline __m256 LoadWeights8(const HalfFloat* w) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
}
#endif
// int8 widens exactly: sign-extend 8 bytes to 32-bit lanes, then convert.
inline __m256 LoadWeights8(const int8_t* w) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w))));
}
// The first `count` (< 8) weights, the other lanes 0 (AVX2 has no 16-bit masked load).
template <typename W>
__m256 LoadWeightsTail(const W* w, int count) {
  W buffer[8] = {};
  std::copy(w, w + count, buffer);
  return LoadWeights8(buffer);
}

// How far ahead of a 16-bit stream to prefetch. A bf16 stream is consumed at half the bytes per
// instruction of an f32 one, and Zen 3's prefetchers alone then leave it short of bandwidth
// (interleaved trials, 32000 x 768 and 4096 x 4096: +10-20% at 2 KiB ahead, 1 and 2 threads);
// the same prefetch on the f32 stream gained nothing. f16 and int8 streams get it too (not
// measured apart).
constexpr int kBf16PrefetchBytes = 2048;

// out[r, j .. j+NW) for r < MA: MA activation rows against NW weight rows read side by side. Each
// (row, column) sums in one order whatever MA and NW are (two chains over alternate 8-lane chunks,
// then the tail), so a column's value never depends on the batch size or on the tile that
// computed it.
template <int MA, int NW, typename W>
void GemvTile(const float* in, const W* weight, const float* bias, float* out, int64_t out_stride,
              int k, int j) {
  const W* w = weight + int64_t{j} * k;
  __m256 acc0[MA][NW], acc1[MA][NW];
  for (int r = 0; r < MA; ++r) {
    for (int c = 0; c < NW; ++c) acc0[r][c] = acc1[r][c] = _mm256_setzero_ps();
  }
  int l = 0;
  for (; l + 16 <= k; l += 16) {
    for (int c = 0; c < NW; ++c) {
      if constexpr (sizeof(W) < 4) {
        // Past the matrix's end this is a hint to a stray line, never a fault.
        _mm_prefetch(reinterpret_cast<const char*>(w + int64_t{c} * k + l) + kBf16PrefetchBytes,
                     _MM_HINT_T0);
      }
      const __m256 w0 = LoadWeights8(w + int64_t{c} * k + l);
      const __m256 w1 = LoadWeights8(w + int64_t{c} * k + l + 8);
      for (int r = 0; r < MA; ++r) {
        acc0[r][c] = _mm256_fmadd_ps(_mm256_loadu_ps(in + int64_t{r} * k + l), w0, acc0[r][c]);
        acc1[r][c] = _mm256_fmadd_ps(_mm256_loadu_ps(in + int64_t{r} * k + l + 8), w1, acc1[r][c]);
      }
    }
  }
  if (l + 8 <= k) {
    for (int c = 0; c < NW; ++c) {
      const __m256 w0 = LoadWeights8(w + int64_t{c} * k + l);
      for (int r = 0; r < MA; ++r) {
        acc0[r][c] = _mm256_fmadd_ps(_mm256_loadu_ps(in + int64_t{r} * k + l), w0, acc0[r][c]);
      }
    }
    l += 8;
  }
  if (l < k) {
    const __m256i tail_mask = internal::TailMask8(k - l);
    for (int c = 0; c < NW; ++c) {
      const __m256 w1 = LoadWeightsTail(w + int64_t{c} * k + l, k - l);
      for (int r = 0; r < MA; ++r) {
        acc1[r][c] = _mm256_fmadd_ps(_mm256_maskload_ps(in + int64_t{r} * k + l, tail_mask), w1,
                                     acc1[r][c]);
      }
    }
  }
  for (int c = 0; c < NW; ++c) {
    const float b = bias != nullptr ? bias[j + c] : 0.0f;
    for (int r = 0; r < MA; ++r) {
      out[r * out_stride + j + c] = internal::HorizontalSum(_mm256_add_ps(acc0[r][c], acc1[r][c])) + b;
    }
  }
}

// Unlike Zen 4 (see the AVX-512 kernel), Zen 3 streams long f32 rows faster as 4 concurrent
// streams than as one: interleaved trials, 1 / 2 threads, k = 1024, 2048, 4096: +17-42%; at k = 768
// no difference (so only from kFourRowsMinK on). bf16 rows side by side were slower at k = 768
// (7 vs 10 GB/s), so bf16 keeps one row at a time.
constexpr int kFourRowsMinK = 1024;

// The AVX-512 kernel's scheme on 8 lanes (see above), for f32, bf16 or f16 weights; `in` holds f32
// activations (already rounded to bf16 or f16 when the weights are). A lone activation row reads
// long f32 weight rows four at a time.
template <int MA, typename W>
void GemvRows(const float* in, const W* weight, const float* bias, float* out, int64_t out_stride,
              int k, int n_begin, int n_end) {
  int j = n_begin;
  if constexpr (MA == 1 && std::is_same_v<W, float>) {
    if (k >= kFourRowsMinK) {
      for (; j + 4 <= n_end; j += 4) GemvTile<1, 4>(in, weight, bias, out, out_stride, k, j);
    }
  }
  for (; j < n_end; ++j) GemvTile<MA, 1>(in, weight, bias, out, out_stride, k, j);
}

// GemvRows<rows_left> for the last rows_left (< kGemvRowGroup) activation rows.
template <int MA, typename W>
void GemvLastRows(int rows_left, const float* in, const W* weight, const float* bias, float* out,
                  int64_t out_stride, int k, int n_begin, int n_end) {
  if constexpr (MA > 0) {
    if (rows_left == MA) {
      GemvRows<MA>(in, weight, bias, out, out_stride, k, n_begin, n_end);
    } else {
      GemvLastRows<MA - 1>(rows_left, in, weight, bias, out, out_stride, k, n_begin, n_end);
    }
  }
}

// out[:, n_begin:n_end] for every row of `in` ([m, k]). Activation rows go in groups of
// kGemvRowGroup; every group passes over a block of weight rows while it sits in L2, so the
// weights are read from memory once whatever m is.
template <typename W>
void Gemv(const float* in, int m, const W* weight, const float* bias, float* out, int64_t out_stride,
          int k, int n_begin, int n_end) {
  const int block_rows = std::max(8, static_cast<int>((256 * 1024) / (sizeof(W) * int64_t{k})));
  for (int j0 = n_begin; j0 < n_end; j0 += block_rows) {
    const int j1 = std::min(n_end, j0 + block_rows);
    int i = 0;
    for (; i + kGemvRowGroup <= m; i += kGemvRowGroup) {
      GemvRows<kGemvRowGroup>(in + int64_t{i} * k, weight, bias, out + i * out_stride, out_stride, k,
                              j0, j1);
    }
    GemvLastRows<kGemvRowGroup - 1>(m - i, in + int64_t{i} * k, weight, bias, out + i * out_stride,
                                    out_stride, k, j0, j1);
  }
}

#endif

#if defined(BATON_SIMD_GEMV)
void GemvF32(const MatmulParams& p, int n_begin, int n_end) {
  Gemv(p.in, p.m, static_cast<const float*>(p.weight), p.bias, p.out, p.n, p.k, n_begin, n_end);
}
#else
constexpr int kF32GemvMaxRows = kStreamMaxRows;
// The portable twin of the SIMD GEMV: one weight row at a time against every activation row, each
// (row, column) one internal::Dot, so here too a column's value does not depend on the batch size
// (sgemm, which this build used for every m before, gives no such guarantee, and
// F32DecodeRowsDoNotDependOnTheBatchSize failed).
void GemvF32(const MatmulParams& p, int n_begin, int n_end) {
  const float* w = static_cast<const float*>(p.weight);
  for (int j = n_begin; j < n_end; ++j) {
    const float b = p.bias != nullptr ? p.bias[j] : 0.0f;
    for (int i = 0; i < p.m; ++i) {
      p.out[int64_t{i} * p.n + j] = internal::Dot(p.in + int64_t{i} * p.k, w + int64_t{j} * p.k, p.k) + b;
    }
  }
}
#endif  // BATON_SIMD_GEMV

// out[:, :rows] (+)= a . w^T with OpenBLAS: a is [m, k], w is [rows, k], out has row stride
// out_stride; bias (may be null) is broadcast into out first and added by beta = 1.
void Sgemm(const float* a, int m, const float* w, int rows, int k, const float* bias, float* out,
           int64_t out_stride) {
  if (bias != nullptr) {
    for (int i = 0; i < m; ++i) std::copy(bias, bias + rows, out + i * out_stride);
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, rows, k, 1.0f, a, k, w, k,
              bias != nullptr ? 1.0f : 0.0f, out, static_cast<int>(out_stride));
}

void SgemmColumns(const MatmulParams& p, int n_begin, int n_end) {
  Sgemm(p.in, p.m, static_cast<const float*>(p.weight) + int64_t{n_begin} * p.k, n_end - n_begin,
        p.k, p.bias != nullptr ? p.bias + n_begin : nullptr, p.out + n_begin, p.n);
}

// Calls fn(member, n_begin, n_end) over column ranges of the group's weights taken back to back
// (the rows of group[0], then group[1], ...), split over the pool.
template <typename Fn>
void ForGroupColumnRanges(ThreadPool* pool, absl::Span<const MatmulParams> group, Fn&& fn) {
  int total_n = 0;
  for (const MatmulParams& p : group) total_n += p.n;
  ForColumnRanges(pool, total_n, int64_t{group[0].m} * group[0].k, [&](int n0, int n1) {
    int offset = 0;
    for (size_t i = 0; i < group.size() && offset < n1; offset += group[i].n, ++i) {
      const int begin = std::max(n0, offset);
      const int end = std::min(n1, offset + group[i].n);
      if (begin < end) fn(i, begin - offset, end - offset);
    }
  });
}

void MatmulF32(absl::Span<const MatmulParams> group, ThreadPool* pool) {
  const int m = group[0].m;
  if (m <= kF32GemvMaxRows) {
    ForGroupColumnRanges(pool, group, [&](size_t i, int n0, int n1) { GemvF32(group[i], n0, n1); });
    return;
  }
  MakeOpenBlasSingleThreaded();
  for (const MatmulParams& p : group) {
    ForColumnRanges(pool, p.n, int64_t{m} * p.k, [&](int n0, int n1) { SgemmColumns(p, n0, n1); });
  }
}

#if defined(BATON_SIMD_GEMV_F16)
// Whole vectors of F16Format<true>::Round and ::Widen (below) through F16C: vcvtps2ph rounds to
// nearest even (immediate, not MXCSR), vcvtph2ps widens exactly. Return how many were done.
int64_t RoundToF16Simd(const float* in, int64_t n, float* out) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    const __m256i half = _mm512_cvtps_ph(_mm512_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm512_storeu_ps(out + i, _mm512_cvtph_ps(half));
  }
#else
  for (; i + 8 <= n; i += 8) {
    const __m128i half = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(half));
  }
#endif
  return i;
}

int64_t WidenF16Simd(const HalfFloat* w, int64_t n, float* out) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, LoadWeights16(w + i));
#else
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, LoadWeights8(w + i));
#endif
  return i;
}
#endif  // BATON_SIMD_GEMV_F16

// bf16 without AVX512_BF16 and f16 (always) share one scheme: activations rounded to the dtype
// once, then f32 arithmetic on weights widened to f32. A Format supplies the dtype's parts:
//   Weight            the weights' element type (uint16_t holding bf16 bits, or HalfFloat);
//   kSimdGemv         whether the SIMD Gemv reads such weights in this build;
//   Round(in, n, out) out[i] = in[i] rounded to the dtype (nearest even) and widened back to f32;
//   Widen(w, n, out)  out[i] = w[i] as f32 (exact).
struct Bf16Format {
  using Weight = uint16_t;
#if defined(BATON_SIMD_GEMV) && !defined(__AVX512F__)
  static constexpr bool kSimdGemv = true;
#else
  static constexpr bool kSimdGemv = false;  // the AVX-512 GEMV reads f32 and f16 only
#endif
  static void Round(const float* in, int64_t n, float* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToF32(F32ToBf16(in[i]));
  }
  static void Widen(const uint16_t* w, int64_t n, float* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToF32(w[i]);
  }
};

// kSimd: F16C conversions and the SIMD GEMV where the build has them; otherwise (the portable
// twin) the scalar HalfFloat casts of dtype.h, which round the same way, and one widened row at a
// time. Both give the same rounded activations and widened weights, bit for bit.
template <bool kSimd>
struct F16Format {
  using Weight = HalfFloat;
#if defined(BATON_SIMD_GEMV_F16)
  static constexpr bool kSimdGemv = kSimd;
#else
  static constexpr bool kSimdGemv = false;
#endif
  static void Round(const float* in, int64_t n, float* out) {
    int64_t i = 0;
#if defined(BATON_SIMD_GEMV_F16)
    if constexpr (kSimdGemv) i = RoundToF16Simd(in, n, out);
#endif
    for (; i < n; ++i) out[i] = F16ToF32(F32ToF16(in[i]));
  }
  static void Widen(const HalfFloat* w, int64_t n, float* out) {
    int64_t i = 0;
#if defined(BATON_SIMD_GEMV_F16)
    if constexpr (kSimdGemv) i = WidenF16Simd(w, n, out);
#endif
    for (; i < n; ++i) out[i] = static_cast<float>(w[i]);
  }
};

// int8 weights in f32 panels for sgemm (prefill sizes on CPUs without AVX512_BF16): the
// activations rounded to bf16 as for bf16 weights (Bf16Format::Round), the integers widened
// exactly; the scales are applied to the finished sums (ScaleColumns). Decode sizes take the byte
// GEMV (matmul_byte_gemv_cpu.cc) instead.
struct Int8Format {
  using Weight = int8_t;
  static void Round(const float* in, int64_t n, float* out) { Bf16Format::Round(in, n, out); }
  static void Widen(const int8_t* w, int64_t n, float* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = w[i];
  }
};

// Columns [n_begin, n_end) at decode sizes: the SIMD GEMV widening each weight as it streams past,
// or one widened row at a time.
template <typename Format>
void WidenedGemvColumns(const MatmulParams& p, const float* rounded_in, int n_begin, int n_end) {
  using W = typename Format::Weight;
  const W* w = static_cast<const W*>(p.weight);
#if defined(BATON_SIMD_GEMV)
  if constexpr (Format::kSimdGemv) {
    Gemv(rounded_in, p.m, w, p.bias, p.out, p.n, p.k, n_begin, n_end);
    return;
  }
#endif
  std::vector<float> w_row(p.k);
  for (int j = n_begin; j < n_end; ++j) {
    Format::Widen(w + int64_t{j} * p.k, p.k, w_row.data());
    const float b = p.bias != nullptr ? p.bias[j] : 0.0f;
    for (int i = 0; i < p.m; ++i) {
      p.out[int64_t{i} * p.n + j] = internal::Dot(rounded_in + int64_t{i} * p.k, w_row.data(), p.k) + b;
    }
  }
}

// Columns [n_begin, n_end) at prefill sizes: panels of weight rows widened to f32, each multiplied
// by OpenBLAS sgemm. Every sgemm call packs all of the activations again, so a panel is 1 MiB
// rather than L2-sized: interleaved A/B on Zen 3 (bf16, m = 32 and 512) gave 256 KiB -> 1 MiB
// 0.97-1.30x (mostly 1.1x), 1 MiB -> 4 MiB 0.71-1.07x.
constexpr int64_t kWidenedPanelBytes = 1024 * 1024;
template <typename Format>
void WidenedSgemmColumns(const MatmulParams& p, const float* rounded_in, int n_begin, int n_end) {
  using W = typename Format::Weight;
  const int panel_rows = std::max(16, static_cast<int>(kWidenedPanelBytes / (4 * int64_t{p.k})));
  thread_local std::vector<float> panel;
  panel.resize(static_cast<size_t>(panel_rows) * p.k);
  const W* w = static_cast<const W*>(p.weight);
  for (int j0 = n_begin; j0 < n_end; j0 += panel_rows) {
    const int rows = std::min(panel_rows, n_end - j0);
    Format::Widen(w + int64_t{j0} * p.k, int64_t{rows} * p.k, panel.data());
    Sgemm(rounded_in, p.m, panel.data(), rows, p.k, p.bias != nullptr ? p.bias + j0 : nullptr,
          p.out + j0, p.n);
  }
}

// The whole scheme for a group: round the shared activations once, then WidenedGemvColumns or
// WidenedSgemmColumns over the pool.
template <typename Format>
void MatmulWidened(absl::Span<const MatmulParams> group, ThreadPool* pool) {
  const MatmulParams& first = group[0];
  thread_local std::vector<float> buffer;
  buffer.resize(int64_t{first.m} * first.k);
  float* rounded = buffer.data();  // the pool's threads reach the buffer through this, not by name
  Format::Round(first.in, int64_t{first.m} * first.k, rounded);
  // Small products share one pass over the pool, as in MatmulF32.
  if (first.m <= kStreamMaxRows) {
    ForGroupColumnRanges(pool, group, [&](size_t i, int n0, int n1) {
      WidenedGemvColumns<Format>(group[i], rounded, n0, n1);
    });
    return;
  }
  MakeOpenBlasSingleThreaded();
  for (const MatmulParams& p : group) {
    ForColumnRanges(pool, p.n, int64_t{p.m} * p.k,
                    [&](int n0, int n1) { WidenedSgemmColumns<Format>(p, rounded, n0, n1); });
  }
}

// out[:, n_begin:n_end) = factor * scale[j] * out + bias[j]: the int8 (and per-row fp8) products'
// sums become the layer's output once they are complete (so no kernel below sees the bias).
void ScaleColumns(const MatmulParams& p, int n_begin, int n_end, float factor = 1.0f) {
  for (int i = 0; i < p.m; ++i) {
    float* out = p.out + int64_t{i} * p.n;
    for (int j = n_begin; j < n_end; ++j) {
      out[j] = out[j] * (p.weight_scales[j] * factor) + (p.bias != nullptr ? p.bias[j] : 0.0f);
    }
  }
}

MatmulParams WithoutBias(MatmulParams p) {
  p.bias = nullptr;
  return p;
}

// Columns [n_begin, n_end) at prefill sizes on an AVX512_BF16 CPU: panels of int8 rows (or fp8
// codes, as their values times 2^-8) widened to bf16 (exact: |q| <= 128 needs 8 significant bits,
// an fp8 value 4) for the bf16 kernel, which reads each panel once per tile of activation rows.
// `a` is the activations as MatmulBf16 lays them out. No bias, no scales.
template <typename W>
void BytePanelColumns(const MatmulParams& p, const uint16_t* a, int64_t k_pad, int n_begin,
                      int n_end) {
  const int panel_rows = std::max(16, static_cast<int>(kWidenedPanelBytes / (2 * int64_t{p.k})));
  thread_local std::vector<uint16_t> panel;
  panel.resize(static_cast<size_t>(panel_rows) * p.k);
  const W* w = static_cast<const W*>(p.weight);
  for (int j0 = n_begin; j0 < n_end; j0 += panel_rows) {
    const int rows = std::min(panel_rows, n_end - j0);
    if constexpr (std::is_same_v<W, uint8_t>) {
      internal::WidenFp8ToBf16(w + int64_t{j0} * p.k, int64_t{rows} * p.k, panel.data());
    } else {
      internal::WidenInt8ToBf16(w + int64_t{j0} * p.k, int64_t{rows} * p.k, panel.data());
    }
    internal::MatmulBf16Avx512(a, k_pad, panel.data(), nullptr, p.out + j0, p.n, p.m, 0, rows,
                               p.k);
  }
}

// [m, k_pad] bf16 activations, zero-padded to a multiple of 32 for whole-vector loads, for the
// AVX512_BF16 kernel; k_pad is returned through `k_pad`.
const uint16_t* Bf16Activations(const MatmulParams& first, ThreadPool* pool, int64_t* k_pad) {
  *k_pad = (first.k + 31) / 32 * 32;
  // Reused across calls on this thread; the pool's threads reach it through `a`, not by name.
  thread_local std::vector<uint16_t> buffer;
  buffer.assign(first.m * *k_pad, 0);
  uint16_t* a = buffer.data();
  const int64_t stride = *k_pad;
  internal::ParallelChunks(pool, first.m, first.k, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      for (int l = 0; l < first.k; ++l) a[i * stride + l] = F32ToBf16(first.in[i * first.k + l]);
    }
  });
  return a;
}

// Decode sizes of the byte-per-weight formats (int8; fp8): on AVX512_BF16 CPUs, batches of 2 to 16
// rows with a scale per row take dpbf16 tiles widening the bytes to bf16 in registers
// (matmul_int8_avx512.cc), then the scales and biases; otherwise (a lone row, group scales, other
// CPUs) the activations rounded to bf16 and the byte GEMV (matmul_byte_gemv_cpu.cc), whose tiles
// scale and add the bias themselves. A row's value may depend on the batch size (as with bf16
// weights: the kernels differ).
template <bool kSimd>
void MatmulByteWeightsDecode(absl::Span<const MatmulParams> group, ThreadPool* pool) {
  const MatmulParams& first = group[0];
  static const bool has_bf16 = internal::CpuHasAvx512Bf16();
  if (kSimd && has_bf16 && first.m >= 2 && first.weight_group_size == 0) {
    const bool fp8 = first.weight_dtype == DType::kF8E4M3;
    int64_t k_pad = 0;
    const uint16_t* a = Bf16Activations(first, pool, &k_pad);
    ForGroupColumnRanges(pool, group, [&](size_t i, int n0, int n1) {
      const MatmulParams& p = group[i];
      if (fp8) {
        internal::MatmulFp8Avx512(a, k_pad, static_cast<const uint8_t*>(p.weight), p.out, p.n,
                                  p.m, n0, n1, p.k);
      } else {
        internal::MatmulInt8Avx512(a, k_pad, static_cast<const int8_t*>(p.weight), p.out, p.n,
                                   p.m, n0, n1, p.k);
      }
      ScaleColumns(p, n0, n1, fp8 ? 256.0f : 1.0f);  // fp8 codes were summed as value * 2^-8
    });
    return;
  }
  thread_local std::vector<float> buffer;
  buffer.resize(int64_t{first.m} * first.k);
  float* rounded = buffer.data();  // the pool's threads reach the buffer through this
  Bf16Format::Round(first.in, int64_t{first.m} * first.k, rounded);
  ForGroupColumnRanges(pool, group, [&](size_t i, int n0, int n1) {
    internal::ByteGemvColumns(group[i], rounded, n0, n1, kSimd);
  });
}

// The whole int8 scheme for a group (see MatmulCpu): decode sizes as MatmulByteWeightsDecode says;
// prefill sizes widen panels of the integers (exactly) to bf16 for the AVX512_BF16 kernel, or to
// f32 for sgemm, then the scales and biases.
template <bool kSimd>
void MatmulInt8(absl::Span<const MatmulParams> group, ThreadPool* pool) {
  const MatmulParams& first = group[0];
  if (first.m <= kStreamMaxRows) {
    MatmulByteWeightsDecode<kSimd>(group, pool);
    return;
  }
  static const bool has_bf16 = internal::CpuHasAvx512Bf16();
  if (kSimd && has_bf16) {
    int64_t k_pad = 0;
    const uint16_t* a = Bf16Activations(first, pool, &k_pad);
    for (const MatmulParams& p : group) {
      ForColumnRanges(pool, p.n, int64_t{p.m} * p.k, [&](int n0, int n1) {
        BytePanelColumns<int8_t>(p, a, k_pad, n0, n1);
        ScaleColumns(p, n0, n1);
      });
    }
    return;
  }
  thread_local std::vector<float> buffer;
  buffer.resize(int64_t{first.m} * first.k);
  float* rounded = buffer.data();
  Int8Format::Round(first.in, int64_t{first.m} * first.k, rounded);
  MakeOpenBlasSingleThreaded();
  for (const MatmulParams& p : group) {
    ForColumnRanges(pool, p.n, int64_t{p.m} * p.k, [&](int n0, int n1) {
      WidenedSgemmColumns<Int8Format>(WithoutBias(p), rounded, n0, n1);
      ScaleColumns(p, n0, n1);
    });
  }
}

// Prefill sizes of the weight formats that dequantize (int4, fp8): the activations rounded to bf16,
// panels of rows dequantized by `dequantize_rows(p, j_begin, j_end, float* out)`, then to bf16 for
// the AVX512_BF16 kernel (when `simd` and the CPU has it) or kept f32 for sgemm.
template <typename DequantizeRows>
void MatmulDequantizedPanels(absl::Span<const MatmulParams> group, ThreadPool* pool, bool simd,
                             DequantizeRows dequantize_rows) {
  const MatmulParams& first = group[0];
  static const bool has_bf16 = internal::CpuHasAvx512Bf16();
  auto panel_rows_for = [](const MatmulParams& p, int bytes_per_weight) {
    return std::max(16, static_cast<int>(kWidenedPanelBytes / (bytes_per_weight * int64_t{p.k})));
  };
  if (simd && has_bf16) {
    int64_t k_pad = 0;
    const uint16_t* a = Bf16Activations(first, pool, &k_pad);
    for (const MatmulParams& p : group) {
      ForColumnRanges(pool, p.n, int64_t{p.m} * p.k, [&](int n0, int n1) {
        const int panel_rows = panel_rows_for(p, 2);
        thread_local std::vector<float> widened;
        thread_local std::vector<uint16_t> panel;
        widened.resize(static_cast<size_t>(panel_rows) * p.k);
        panel.resize(widened.size());
        for (int j0 = n0; j0 < n1; j0 += panel_rows) {
          const int rows = std::min(panel_rows, n1 - j0);
          dequantize_rows(p, j0, j0 + rows, widened.data());
          for (int64_t e = 0; e < int64_t{rows} * p.k; ++e) panel[e] = F32ToBf16(widened[e]);
          internal::MatmulBf16Avx512(a, k_pad, panel.data(), p.bias != nullptr ? p.bias + j0 : nullptr,
                                     p.out + j0, p.n, p.m, 0, rows, p.k);
        }
      });
    }
    return;
  }
  thread_local std::vector<float> buffer;
  buffer.resize(int64_t{first.m} * first.k);
  float* rounded = buffer.data();
  Bf16Format::Round(first.in, int64_t{first.m} * first.k, rounded);
  MakeOpenBlasSingleThreaded();
  for (const MatmulParams& p : group) {
    ForColumnRanges(pool, p.n, int64_t{p.m} * p.k, [&](int n0, int n1) {
      const int panel_rows = panel_rows_for(p, 4);
      thread_local std::vector<float> panel;
      panel.resize(static_cast<size_t>(panel_rows) * p.k);
      for (int j0 = n0; j0 < n1; j0 += panel_rows) {
        const int rows = std::min(panel_rows, n1 - j0);
        dequantize_rows(p, j0, j0 + rows, panel.data());
        Sgemm(rounded, p.m, panel.data(), rows, p.k, p.bias != nullptr ? p.bias + j0 : nullptr,
              p.out + j0, p.n);
      }
    });
  }
}

// The whole int4 scheme for a group (see MatmulCpu): decode batches quantize the activations to
// int8 per group and take the integer GEMV that unpacks the nibbles in registers
// (matmul_int4_cpu.cc); prefill sizes dequantize panels (MatmulDequantizedPanels).
template <bool kSimd>
void MatmulInt4(absl::Span<const MatmulParams> group, ThreadPool* pool) {
  const MatmulParams& first = group[0];
  if (first.m <= kStreamMaxRows) {
    const int64_t values = int64_t{first.m} * first.k;
    const int64_t groups = int64_t{first.m} * (first.k / first.weight_group_size);
    thread_local std::vector<int8_t> q;
    thread_local std::vector<float> floats;
    q.resize(values);
    floats.resize(2 * groups);
    internal::Int4QuantizeActivations(first.in, first.m, first.k, first.weight_group_size, q.data(),
                                      floats.data(), floats.data() + groups);
    // The pool's threads reach the buffers through `a`, not by name.
    const internal::Int4Activations a{q.data(), floats.data(), floats.data() + groups};
    static const internal::Int4GemvIsa best = internal::BestInt4GemvIsa();
    const internal::Int4GemvIsa isa = kSimd ? best : internal::Int4GemvIsa::kPortable;
    ForGroupColumnRanges(pool, group, [&](size_t i, int n0, int n1) {
      internal::Int4GemvColumns(group[i], a, n0, n1, isa);
    });
    return;
  }
  MatmulDequantizedPanels(group, pool, kSimd, internal::DequantizeInt4Rows);
}

// The whole fp8 scheme for a group (see MatmulCpu): decode sizes as MatmulByteWeightsDecode says;
// prefill sizes with a scale per row widen panels of the codes exactly to bf16 (as int8's) on
// AVX512_BF16 CPUs, then the scales; otherwise they dequantize panels (MatmulDequantizedPanels).
template <bool kSimd>
void MatmulFp8(absl::Span<const MatmulParams> group, ThreadPool* pool) {
  const MatmulParams& first = group[0];
  if (first.m <= kStreamMaxRows) {
    MatmulByteWeightsDecode<kSimd>(group, pool);
    return;
  }
  static const bool has_bf16 = internal::CpuHasAvx512Bf16();
  if (kSimd && has_bf16 && first.weight_group_size == 0) {
    int64_t k_pad = 0;
    const uint16_t* a = Bf16Activations(first, pool, &k_pad);
    for (const MatmulParams& p : group) {
      ForColumnRanges(pool, p.n, int64_t{p.m} * p.k, [&](int n0, int n1) {
        BytePanelColumns<uint8_t>(p, a, k_pad, n0, n1);
        ScaleColumns(p, n0, n1, /*factor=*/256.0f);
      });
    }
    return;
  }
  MatmulDequantizedPanels(group, pool, kSimd, internal::DequantizeFp8Rows);
}

void MatmulBf16(absl::Span<const MatmulParams> group, ThreadPool* pool) {
  static const bool has_bf16 = internal::CpuHasAvx512Bf16();
  if (!has_bf16) {
    internal::MatmulBf16Portable(group, pool);
    return;
  }
  const MatmulParams& first = group[0];
  int64_t k_pad = 0;
  const uint16_t* a = Bf16Activations(first, pool, &k_pad);
  auto columns = [&](const MatmulParams& p, int n0, int n1) {
    internal::MatmulBf16Avx512(a, k_pad, static_cast<const uint16_t*>(p.weight), p.bias, p.out,
                               p.n, p.m, n0, n1, p.k);
  };
  // Small products share one pass over the pool, as in MatmulF32.
  if (first.m <= kStreamMaxRows) {
    ForGroupColumnRanges(pool, group, [&](size_t i, int n0, int n1) { columns(group[i], n0, n1); });
    return;
  }
  for (const MatmulParams& p : group) {
    ForColumnRanges(pool, p.n, int64_t{p.m} * p.k, [&](int n0, int n1) { columns(p, n0, n1); });
  }
}

}  // namespace

namespace internal {

int F32GemvMaxRows() { return kF32GemvMaxRows; }

void MatmulBf16Portable(absl::Span<const MatmulParams> group, ThreadPool* pool) {
  MatmulWidened<Bf16Format>(group, pool);
}

void MatmulF16Portable(absl::Span<const MatmulParams> group, ThreadPool* pool) {
  MatmulWidened<F16Format<false>>(group, pool);
}

void MatmulInt8Portable(absl::Span<const MatmulParams> group, ThreadPool* pool) {
  MatmulInt8<false>(group, pool);
}

void MatmulInt4Portable(absl::Span<const MatmulParams> group, ThreadPool* pool) {
  MatmulInt4<false>(group, pool);
}

void MatmulFp8Portable(absl::Span<const MatmulParams> group, ThreadPool* pool) {
  MatmulFp8<false>(group, pool);
}

}  // namespace internal

absl::Status MatmulCpu(const MatmulParams& p, ThreadPool* pool) {
  return MatmulGroupCpu(absl::MakeConstSpan(&p, 1), pool);
}

absl::Status MatmulGroupCpu(absl::Span<const MatmulParams> group, ThreadPool* pool) {
  if (group.empty()) return absl::OkStatus();
  const MatmulParams& first = group[0];
  for (const MatmulParams& p : group) {
    RETURN_IF_ERROR(Validate(p));
    if (p.in != first.in || p.m != first.m || p.k != first.k ||
        p.weight_dtype != first.weight_dtype || p.weight_group_size != first.weight_group_size) {
      return absl::InvalidArgumentError(
          "MatmulGroup: every member must share in, m, k, weight_dtype and weight_group_size");
    }
  }
  if (first.m == 0) return absl::OkStatus();
  switch (first.weight_dtype) {
    case DType::kF32: MatmulF32(group, pool); break;
    case DType::kBF16: MatmulBf16(group, pool); break;
    case DType::kF16: MatmulWidened<F16Format<true>>(group, pool); break;
    case DType::kI8: MatmulInt8<true>(group, pool); break;
    case DType::kI4: MatmulInt4<true>(group, pool); break;
    case DType::kF8E4M3: MatmulFp8<true>(group, pool); break;
  }
  return absl::OkStatus();
}

}  // namespace baton::kernels
