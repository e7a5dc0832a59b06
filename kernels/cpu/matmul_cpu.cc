// MatmulCpu: picks a kernel by weight dtype and m.
//   f32, m <= kStreamMaxRows: an AVX-512 dot-product kernel that streams each weight row once past
//     row groups of up to 8 activation rows (decode batches), columns split over the pool.
//   f32, larger m: OpenBLAS sgemm, columns split over the pool, OpenBLAS itself single-threaded.
//   bf16: activations rounded to bf16 once, then the AVX512_BF16 kernel (matmul_bf16_avx512.cc)
//     or, on CPUs without it, a portable loop with the same rounding of the activations.
// MatmulGroupCpu runs several products of one input as one pass over the pool when m is small.
#include <cblas.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "absl/types/span.h"
#include "baton/kernels/matmul.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vec_math.h"
#include "runtime/common/status_macros.h"

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
// out[r, c] = in[r, :] . w[c, :] (+ bias[c]) for r < MA and every c in [n_begin, n_end).
//
// One weight row at a time, start to end: the weights are then a single sequential stream, which
// the hardware prefetchers follow at full read bandwidth. Tiles of several weight rows read
// side by side run as many short streams (k * 4 bytes each) and measured ~35% slower on Zen 4.
template <int MA>
void GemvRowsF32(const MatmulParams& p, int row, int n_begin, int n_end) {
  const float* in = p.in + int64_t{row} * p.k;
  float* out = p.out + int64_t{row} * p.n;
  const int k = p.k;
  const __mmask16 tail = internal::TailMask(k % 16);
  for (int j = n_begin; j < n_end; ++j) {
    const float* w = static_cast<const float*>(p.weight) + int64_t{j} * k;
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
    const float b = p.bias != nullptr ? p.bias[j] : 0.0f;
    for (int r = 0; r < MA; ++r) {
      out[r * int64_t{p.n} + j] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r])) + b;
    }
  }
}

// Activation rows go in groups of 8 (16 accumulators + 2 weight vectors fit the 32 registers);
// every group passes over a block of weight rows while it sits in L2, so the weights are read from
// memory once whatever m is.
void GemvF32(const MatmulParams& p, int n_begin, int n_end) {
  const int block_rows = std::max(8, static_cast<int>((256 * 1024) / (4 * int64_t{p.k})));
  for (int j0 = n_begin; j0 < n_end; j0 += block_rows) {
    const int j1 = std::min(n_end, j0 + block_rows);
    int i = 0;
    for (; i + 8 <= p.m; i += 8) GemvRowsF32<8>(p, i, j0, j1);
    switch (p.m - i) {
      case 7: GemvRowsF32<7>(p, i, j0, j1); break;
      case 6: GemvRowsF32<6>(p, i, j0, j1); break;
      case 5: GemvRowsF32<5>(p, i, j0, j1); break;
      case 4: GemvRowsF32<4>(p, i, j0, j1); break;
      case 3: GemvRowsF32<3>(p, i, j0, j1); break;
      case 2: GemvRowsF32<2>(p, i, j0, j1); break;
      case 1: GemvRowsF32<1>(p, i, j0, j1); break;
      default: break;
    }
  }
}
#endif  // __AVX512F__

void SgemmColumns(const MatmulParams& p, int n_begin, int n_end) {
  const float* w = static_cast<const float*>(p.weight);
  float* out = p.out + n_begin;
  const int cols = n_end - n_begin;
  if (p.bias != nullptr) {
    for (int i = 0; i < p.m; ++i) {
      std::copy(p.bias + n_begin, p.bias + n_end, out + int64_t{i} * p.n);
    }
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, p.m, cols, p.k, 1.0f, p.in, p.k,
              w + int64_t{n_begin} * p.k, p.k, p.bias != nullptr ? 1.0f : 0.0f, out, p.n);
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
#if defined(__AVX512F__)
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

// Columns [n_begin, n_end) of the portable bf16 path.
void MatmulBf16PortableColumns(const MatmulParams& p, const float* rounded_in, int n_begin,
                               int n_end) {
  const uint16_t* w = static_cast<const uint16_t*>(p.weight);
  std::vector<float> w_row(p.k);
  for (int j = n_begin; j < n_end; ++j) {
    for (int l = 0; l < p.k; ++l) w_row[l] = Bf16ToF32(w[int64_t{j} * p.k + l]);
    const float b = p.bias != nullptr ? p.bias[j] : 0.0f;
    for (int i = 0; i < p.m; ++i) {
      p.out[int64_t{i} * p.n + j] = internal::Dot(rounded_in + int64_t{i} * p.k, w_row.data(), p.k) + b;
    }
  }
}

void MatmulBf16(absl::Span<const MatmulParams> group, ThreadPool* pool) {
  static const bool has_bf16 = internal::CpuHasAvx512Bf16();
  if (!has_bf16) {
    for (const MatmulParams& p : group) internal::MatmulBf16Portable(p, pool);
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

void MatmulBf16Portable(const MatmulParams& p, ThreadPool* pool) {
  thread_local std::vector<float> buffer;
  buffer.resize(int64_t{p.m} * p.k);
  float* rounded = buffer.data();
  for (int64_t i = 0; i < int64_t{p.m} * p.k; ++i) rounded[i] = Bf16ToF32(F32ToBf16(p.in[i]));
  ForColumnRanges(pool, p.n, int64_t{p.m} * p.k,
                  [&](int n0, int n1) { MatmulBf16PortableColumns(p, rounded, n0, n1); });
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
