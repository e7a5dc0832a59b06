// MatmulCpu: picks a kernel by weight dtype and m.
//   f32, m <= kStreamMaxRows: a SIMD dot-product kernel (AVX-512, or AVX2 + FMA) that streams each
//     weight row once past row groups of activation rows (decode batches), columns split over the
//     pool; on AVX2 a lone activation row reads long weight rows four at a time.
//   f32, larger m: OpenBLAS sgemm, columns split over the pool, OpenBLAS itself single-threaded.
//   bf16: activations rounded to bf16 once, then the AVX512_BF16 kernel (matmul_bf16_avx512.cc)
//     or, on CPUs without it, the same rounding of the activations and f32 arithmetic: the AVX2
//     GEMV widening bf16 weights on the fly for small m, widened weight panels through sgemm for
//     large m.
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
constexpr int kGemvRowGroup = 8;  // 16 accumulators + 2 weight vectors fit the 32 registers

// out[r, c] = in[r, :] . w[c, :] (+ bias[c]) for r < MA and every c in [n_begin, n_end).
//
// One weight row at a time, start to end: the weights are then a single sequential stream, which
// the hardware prefetchers follow at full read bandwidth. Tiles of several weight rows read
// side by side run as many short streams (k * 4 bytes each) and measured ~35% slower on Zen 4.
template <int MA>
void GemvRows(const float* in, const float* weight, const float* bias, float* out, int64_t out_stride,
              int k, int n_begin, int n_end) {
  const __mmask16 tail = internal::TailMask(k % 16);
  for (int j = n_begin; j < n_end; ++j) {
    const float* w = weight + int64_t{j} * k;
    // Two accumulators per activation row hide the FMA latency.
    __m512 acc0[MA], acc1[MA];
    for (int r = 0; r < MA; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
    int l = 0;
    for (; l + 32 <= k; l += 32) {
      const __m512 w0 = _mm512_loadu_ps(w + l);
      const __m512 w1 = _mm512_loadu_ps(w + l + 16);
      for (int r = 0; r < MA; ++r) {
        acc0[r] = _mm512_fmadd_ps(_mm512_loadu_ps(in + int64_t{r} * k + l), w0, acc0[r]);
        acc1[r] = _mm512_fmadd_ps(_mm512_loadu_ps(in + int64_t{r} * k + l + 16), w1, acc1[r]);
      }
    }
    if (l + 16 <= k) {
      const __m512 w0 = _mm512_loadu_ps(w + l);
      for (int r = 0; r < MA; ++r) {
        acc0[r] = _mm512_fmadd_ps(_mm512_loadu_ps(in + int64_t{r} * k + l), w0, acc0[r]);
      }
      l += 16;
    }
    if (l < k) {
      const __m512 w1 = _mm512_maskz_loadu_ps(tail, w + l);
      for (int r = 0; r < MA; ++r) {
        acc1[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, in + int64_t{r} * k + l), w1, acc1[r]);
      }
    }
    const float b = bias != nullptr ? bias[j] : 0.0f;
    for (int r = 0; r < MA; ++r) {
      out[r * out_stride + j] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r])) + b;
    }
  }
}

#elif defined(__AVX2__) && defined(__FMA__)
#define BATON_SIMD_GEMV 1
// 12 accumulators + 2 weight vectors in the 16 registers. Reading each weight row once per 6
// activation rows instead of once per 4 measured 1.02-1.17x at m = 8 and 16 (interleaved A/B, Zen 3).
constexpr int kGemvRowGroup = 6;

// 8 weights as f32: f32 loads as is; bf16 is the high half of an f32, so widen and shift.
inline __m256 LoadWeights8(const float* w) { return _mm256_loadu_ps(w); }
inline __m256 LoadWeights8(const uint16_t* w) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}
// The first `count` (< 8) weights, the other lanes 0 (AVX2 has no 16-bit masked load).
template <typename W>
__m256 LoadWeightsTail(const W* w, int count) {
  W buffer[8] = {};
  std::copy(w, w + count, buffer);
  return LoadWeights8(buffer);
}

// How far ahead of the bf16 stream to prefetch. A bf16 stream is consumed at half the bytes per
// instruction of an f32 one, and Zen 3's prefetchers alone then leave it short of bandwidth
// (interleaved trials, 32000 x 768 and 4096 x 4096: +10-20% at 2 KiB ahead, 1 and 2 threads);
// the same prefetch on the f32 stream gained nothing.
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
      if constexpr (sizeof(W) == 2) {
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

// The AVX-512 kernel's scheme on 8 lanes (see above), for f32 or bf16 weights; `in` holds f32
// activations (already rounded to bf16 when the weights are bf16). A lone activation row reads long
// f32 weight rows four at a time.
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
#endif

#if defined(BATON_SIMD_GEMV)
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

void GemvF32(const MatmulParams& p, int n_begin, int n_end) {
  Gemv(p.in, p.m, static_cast<const float*>(p.weight), p.bias, p.out, p.n, p.k, n_begin, n_end);
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
#if defined(BATON_SIMD_GEMV)
  if (m <= kStreamMaxRows) {
    ForGroupColumnRanges(pool, group, [&](size_t i, int n0, int n1) { GemvF32(group[i], n0, n1); });
    return;
  }
#endif
  MakeOpenBlasSingleThreaded();
  for (const MatmulParams& p : group) {
    ForColumnRanges(pool, p.n, int64_t{m} * p.k, [&](int n0, int n1) { SgemmColumns(p, n0, n1); });
  }
}

// Columns [n_begin, n_end) of the bf16 path without AVX512_BF16 at decode sizes: the SIMD GEMV
// widening each weight as it streams past, or, without SIMD, one widened row at a time.
void Bf16GemvColumns(const MatmulParams& p, const float* rounded_in, int n_begin, int n_end) {
  const uint16_t* w = static_cast<const uint16_t*>(p.weight);
#if defined(BATON_SIMD_GEMV) && !defined(__AVX512F__)
  Gemv(rounded_in, p.m, w, p.bias, p.out, p.n, p.k, n_begin, n_end);
#else
  std::vector<float> w_row(p.k);
  for (int j = n_begin; j < n_end; ++j) {
    for (int l = 0; l < p.k; ++l) w_row[l] = Bf16ToF32(w[int64_t{j} * p.k + l]);
    const float b = p.bias != nullptr ? p.bias[j] : 0.0f;
    for (int i = 0; i < p.m; ++i) {
      p.out[int64_t{i} * p.n + j] = internal::Dot(rounded_in + int64_t{i} * p.k, w_row.data(), p.k) + b;
    }
  }
#endif
}

// Columns [n_begin, n_end) of the bf16 path without AVX512_BF16 at prefill sizes: panels of weight
// rows widened to f32, each multiplied by OpenBLAS sgemm. Every sgemm call packs all of the
// activations again, so a panel is 1 MiB rather than L2-sized: interleaved A/B on Zen 3 (m = 32
// and 512) gave 256 KiB -> 1 MiB 0.97-1.30x (mostly 1.1x), 1 MiB -> 4 MiB 0.71-1.07x.
constexpr int64_t kBf16PanelBytes = 1024 * 1024;
void Bf16SgemmColumns(const MatmulParams& p, const float* rounded_in, int n_begin, int n_end) {
  const int panel_rows = std::max(16, static_cast<int>(kBf16PanelBytes / (4 * int64_t{p.k})));
  thread_local std::vector<float> panel;
  panel.resize(static_cast<size_t>(panel_rows) * p.k);
  const uint16_t* w = static_cast<const uint16_t*>(p.weight);
  for (int j0 = n_begin; j0 < n_end; j0 += panel_rows) {
    const int rows = std::min(panel_rows, n_end - j0);
    const uint16_t* src = w + int64_t{j0} * p.k;
    for (int64_t l = 0; l < int64_t{rows} * p.k; ++l) panel[l] = Bf16ToF32(src[l]);
    Sgemm(rounded_in, p.m, panel.data(), rows, p.k, p.bias != nullptr ? p.bias + j0 : nullptr,
          p.out + j0, p.n);
  }
}

void MatmulBf16(absl::Span<const MatmulParams> group, ThreadPool* pool) {
  static const bool has_bf16 = internal::CpuHasAvx512Bf16();
  if (!has_bf16) {
    internal::MatmulBf16Portable(group, pool);
    return;
  }
  const MatmulParams& first = group[0];
  // [m, k_pad] bf16 activations, zero-padded to a multiple of 32 for whole-vector loads.
  const int64_t k_pad = (first.k + 31) / 32 * 32;
  // Reused across calls on this thread; the pool's threads reach it through `a`, not by name.
  thread_local std::vector<uint16_t> buffer;
  buffer.assign(first.m * k_pad, 0);
  uint16_t* a = buffer.data();
  internal::ParallelChunks(pool, first.m, first.k, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      for (int l = 0; l < first.k; ++l) a[i * k_pad + l] = F32ToBf16(first.in[i * first.k + l]);
    }
  });
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

void MatmulBf16Portable(absl::Span<const MatmulParams> group, ThreadPool* pool) {
  const MatmulParams& first = group[0];
  thread_local std::vector<float> buffer;
  buffer.resize(int64_t{first.m} * first.k);
  float* rounded = buffer.data();  // the pool's threads reach the buffer through this, not by name
  for (int64_t i = 0; i < int64_t{first.m} * first.k; ++i) {
    rounded[i] = Bf16ToF32(F32ToBf16(first.in[i]));
  }
  // Small products share one pass over the pool, as in MatmulF32.
  if (first.m <= kStreamMaxRows) {
    ForGroupColumnRanges(pool, group, [&](size_t i, int n0, int n1) {
      Bf16GemvColumns(group[i], rounded, n0, n1);
    });
    return;
  }
  MakeOpenBlasSingleThreaded();
  for (const MatmulParams& p : group) {
    ForColumnRanges(pool, p.n, int64_t{p.m} * p.k,
                    [&](int n0, int n1) { Bf16SgemmColumns(p, rounded, n0, n1); });
  }
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
    if (p.in != first.in || p.m != first.m || p.k != first.k || p.weight_dtype != first.weight_dtype) {
      return absl::InvalidArgumentError(
          "MatmulGroup: every member must share in, m, k and weight_dtype");
    }
  }
  if (first.m == 0) return absl::OkStatus();
  if (first.weight_dtype == DType::kF32) {
    MatmulF32(group, pool);
  } else {
    MatmulBf16(group, pool);
  }
  return absl::OkStatus();
}

}  // namespace baton::kernels
