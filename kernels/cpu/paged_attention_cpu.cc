// Decode attention over the paged KV cache on the CPU.
//
// A work item is (sequence, kv head): the query heads that share the kv head read each key and
// value row from memory once. The context is walked in tiles of kKeyTile keys with an online
// softmax: scores for the tile (16 keys at a time, reduced with a 16x16 transpose-add), the
// running max/sum update, then P.V into f32 accumulators with up to 4 heads x 64 dims in
// registers. A block's keys of one kv head are one contiguous run (paged_kv.h), but the blocks of
// a sequence lie anywhere in the pool, so the next tile's rows are prefetched. A bf16 cache is read
// as is and widened to f32 in registers (AVX-512), or a tile at a time into f32 rows (the portable
// path), so the arithmetic is the same for both element types.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "baton/kernels/paged_attention.h"
#include "kernels/common/dtype.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vec_math.h"

namespace baton::kernels {

namespace {

// The AVX-512 path loads 16-bit rows with masks, which needs BW and VL beside F (every AVX-512 CPU
// since Skylake-X has them).
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define BATON_PAGED_ATTENTION_AVX512 1
#endif

constexpr int kKeyTile = 64;

// T is the cache element: float, or uint16_t holding bf16 bits.
template <typename T>
struct Scratch {
  std::vector<const T*> k_rows;  // [context_len]: key row of token j for this kv head
  std::vector<const T*> v_rows;  // [context_len]
  std::vector<float> wide;       // [2, kKeyTile, head_dim]: a bf16 tile's K and V rows as f32
  std::vector<const float*> wide_rows;  // [2, kKeyTile]: into `wide` (portable path only)
  std::vector<float> q;              // [group, head_dim], pre-multiplied by scale
  std::vector<float> p;              // [group, kKeyTile]: scores, then probabilities, of a tile
  std::vector<float> acc;            // [group, head_dim]: unnormalized outputs
  std::vector<float> m;              // [group]: running max
  std::vector<float> l;              // [group]: running sum
  std::vector<float*> acc_rows;      // [group]: &acc[g * head_dim]
};

// Prefetches rows [begin, end) of `rows`, each `bytes` long, into L2.
template <typename T>
void PrefetchRows(const std::vector<const T*>& rows, int begin, int end, int bytes) {
#if defined(__AVX512F__) || defined(__AVX2__)
  for (int j = begin; j < end; ++j) {
    const char* row = reinterpret_cast<const char*>(rows[j]);
    for (int offset = 0; offset < bytes; offset += 64) _mm_prefetch(row + offset, _MM_HINT_T1);
  }
#else
  (void)rows, (void)begin, (void)end, (void)bytes;
#endif
}

#if defined(BATON_PAGED_ATTENTION_AVX512)
// Up to 16 elements as f32 lanes (the mask zeroes the others): f32 as is, bf16 widened (it is the
// high half of an f32).
inline __m512 Load16(__mmask16 mask, const float* x) { return _mm512_maskz_loadu_ps(mask, x); }
inline __m512 Load16(__mmask16 mask, const uint16_t* x) {
  const __m512i wide = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, x));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}

// The 64-byte lines of NV vectors of 16 elements from `row` into L2, as the kernels read them.
// The kernels call it for the row one tile ahead of each row they read, so the prefetches are
// spread over the tile's work: issued as a burst of a tile's rows (PrefetchRows) they filled the
// miss queue and stalled (perf: the samples sat on the prefetches and on each row's first load).
template <int NV, typename T>
inline void PrefetchVectors(const T* row) {
  const char* bytes = reinterpret_cast<const char*>(row);
  for (int offset = 0; offset < NV * 16 * static_cast<int>(sizeof(T)); offset += 64) {
    _mm_prefetch(bytes + offset, _MM_HINT_T1);
  }
}

// q . k over NV vectors of 16 lanes (the masks zero the lanes past head_dim), summed in c order.
template <int NV, typename T>
inline __m512 DotVectors(const __m512 (&q)[NV], const T* k, const __mmask16 (&masks)[NV]) {
  __m512 sum = _mm512_mul_ps(q[0], Load16(masks[0], k));
  for (int c = 1; c < NV; ++c) sum = _mm512_fmadd_ps(q[c], Load16(masks[c], k + 16 * c), sum);
  return sum;
}

// Scores (below) with head_dim in (16 * (NV - 1), 16 * NV]: q's NV vectors stay in registers and a
// block of 16 keys is unrolled, so its 16 sums stay in registers too until the transpose-add.
// The loop it replaced reloaded q for every key and kept the sums on the stack, and decode
// attention was bound by those instructions, not by its reads (attention_bench PagedDecode ran at
// 15 GB/s with the whole KV in L3).
template <int NV, typename T>
void ScoresVectors(const Scratch<T>& sc, float* p, int group, int tile, int len, int head_dim) {
  __mmask16 masks[NV];
  for (int c = 0; c < NV; ++c) masks[c] = internal::TailMask(std::min(16, head_dim - 16 * c));
  const int num_rows = static_cast<int>(sc.k_rows.size());
  for (int j0 = 0; j0 < len; j0 += 16) {
    const int num_keys = std::min(16, len - j0);
    const T* const* k_rows = sc.k_rows.data() + tile + j0;
    for (int g = 0; g < group; ++g) {
      __m512 q[NV];
      for (int c = 0; c < NV; ++c) q[c] = _mm512_maskz_loadu_ps(masks[c], sc.q.data() + g * head_dim + 16 * c);
      __m512 acc[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        if (j < num_keys) {
          if (g == 0 && tile + j0 + j + kKeyTile < num_rows) {
            PrefetchVectors<NV>(k_rows[j + kKeyTile]);
          }
          acc[j] = DotVectors(q, k_rows[j], masks);
        } else {
          acc[j] = _mm512_setzero_ps();
        }
      }
      _mm512_mask_storeu_ps(p + g * kKeyTile + j0, internal::TailMask(num_keys),
                            internal::Reduce16(acc));
    }
  }
}
#endif

// The portable path's f32 rows [tile, tile + len) of `rows`: the rows themselves for an f32 cache;
// for bf16, widened into `wide` (len rows of head_dim), pointed to from `wide_rows`.
inline const float* const* WideRows(const std::vector<const float*>& rows, int tile, int, int,
                                    float*, const float**) {
  return rows.data() + tile;
}
inline const float* const* WideRows(const std::vector<const uint16_t*>& rows, int tile, int len,
                                    int head_dim, float* wide, const float** wide_rows) {
  for (int j = 0; j < len; ++j) {
    float* out = wide + int64_t{j} * head_dim;
    for (int d = 0; d < head_dim; ++d) out[d] = Bf16ToF32(rows[tile + j][d]);
    wide_rows[j] = out;
  }
  return wide_rows;
}

// p[g, j - tile] = q[g, :] . k_rows[j][:] for j in [tile, tile + len).
template <typename T>
void Scores(Scratch<T>& sc, float* p, int group, int tile, int len, int head_dim) {
#if defined(BATON_PAGED_ATTENTION_AVX512)
  switch ((head_dim + 15) / 16) {
    case 1: return ScoresVectors<1>(sc, p, group, tile, len, head_dim);
    case 2: return ScoresVectors<2>(sc, p, group, tile, len, head_dim);
    case 3: return ScoresVectors<3>(sc, p, group, tile, len, head_dim);
    case 4: return ScoresVectors<4>(sc, p, group, tile, len, head_dim);
    case 5: return ScoresVectors<5>(sc, p, group, tile, len, head_dim);
    case 6: return ScoresVectors<6>(sc, p, group, tile, len, head_dim);
    case 7: return ScoresVectors<7>(sc, p, group, tile, len, head_dim);
    case 8: return ScoresVectors<8>(sc, p, group, tile, len, head_dim);
    default: break;  // head_dim > 128: the loop below
  }
#endif
  const float* const* k_rows =
      WideRows(sc.k_rows, tile, len, head_dim, sc.wide.data(), sc.wide_rows.data());
  for (int g = 0; g < group; ++g) {
    for (int j = 0; j < len; ++j) {
      p[g * kKeyTile + j] = internal::Dot(sc.q.data() + g * head_dim, k_rows[j], head_dim);
    }
  }
}

#if defined(BATON_PAGED_ATTENTION_AVX512)
// acc[g0 .. g0+GA][d0 .. d0+16*NV) += sum_j p[g, j] v_rows[tile + j][d] (last vector masked).
template <int GA, int NV, typename T>
void PvBlock(const Scratch<T>& sc, const float* p, float* const* out, int g0, int d0, int tile,
             int len, int head_dim) {
  __mmask16 masks[NV];
  for (int c = 0; c < NV; ++c) masks[c] = internal::TailMask(std::min(16, head_dim - d0 - 16 * c));
  float* rows[GA];
  for (int a = 0; a < GA; ++a) rows[a] = out[g0 + a] + d0;
  __m512 acc[GA * NV];
  for (int a = 0; a < GA; ++a) {
    for (int c = 0; c < NV; ++c) acc[a * NV + c] = _mm512_maskz_loadu_ps(masks[c], rows[a] + 16 * c);
  }
  const T* const* v_rows = sc.v_rows.data() + tile;
  const int num_ahead = std::min(len, static_cast<int>(sc.v_rows.size()) - tile - kKeyTile);
  for (int j = 0; j < len; ++j) {
    if (j < num_ahead) PrefetchVectors<NV>(v_rows[j + kKeyTile] + d0);
    const T* v = v_rows[j] + d0;
    __m512 vv[NV];
    for (int c = 0; c < NV; ++c) vv[c] = Load16(masks[c], v + 16 * c);
    for (int a = 0; a < GA; ++a) {
      const __m512 pa = _mm512_set1_ps(p[(g0 + a) * kKeyTile + j]);
      for (int c = 0; c < NV; ++c) acc[a * NV + c] = _mm512_fmadd_ps(pa, vv[c], acc[a * NV + c]);
    }
  }
  for (int a = 0; a < GA; ++a) {
    for (int c = 0; c < NV; ++c) _mm512_mask_storeu_ps(rows[a] + 16 * c, masks[c], acc[a * NV + c]);
  }
}

template <int GA, typename T>
void PvHeads(const Scratch<T>& sc, const float* p, float* const* out, int g0, int tile, int len,
             int head_dim) {
  int d0 = 0;
  for (; d0 + 64 <= head_dim; d0 += 64) PvBlock<GA, 4>(sc, p, out, g0, d0, tile, len, head_dim);
  switch ((head_dim - d0 + 15) / 16) {  // 49..63 dims left need 4 vectors, the last partial
    case 4: PvBlock<GA, 4>(sc, p, out, g0, d0, tile, len, head_dim); break;
    case 3: PvBlock<GA, 3>(sc, p, out, g0, d0, tile, len, head_dim); break;
    case 2: PvBlock<GA, 2>(sc, p, out, g0, d0, tile, len, head_dim); break;
    case 1: PvBlock<GA, 1>(sc, p, out, g0, d0, tile, len, head_dim); break;
    default: break;
  }
}
#endif

// acc[g][:] += p[g, :len] . V[tile, tile + len) for every head g of the group.
template <typename T>
void WeightedValues(Scratch<T>& sc, const float* p, float* const* acc, int group, int tile,
                    int len, int head_dim) {
#if defined(BATON_PAGED_ATTENTION_AVX512)
  int g0 = 0;
  for (; g0 + 4 <= group; g0 += 4) PvHeads<4>(sc, p, acc, g0, tile, len, head_dim);
  switch (group - g0) {
    case 3: PvHeads<3>(sc, p, acc, g0, tile, len, head_dim); break;
    case 2: PvHeads<2>(sc, p, acc, g0, tile, len, head_dim); break;
    case 1: PvHeads<1>(sc, p, acc, g0, tile, len, head_dim); break;
    default: break;
  }
#else
  const float* const* v_rows =
      WideRows(sc.v_rows, tile, len, head_dim, sc.wide.data() + int64_t{kKeyTile} * head_dim,
               sc.wide_rows.data() + kKeyTile);
  for (int g = 0; g < group; ++g) {
    for (int j = 0; j < len; ++j) {
      internal::Axpy(acc[g], v_rows[j], p[g * kKeyTile + j], head_dim);
    }
  }
#endif
}

template <typename T>
void RunItem(const PagedAttentionParams& params, int seq, int kv_head, Scratch<T>& sc) {
  const PagedKvView& cache = params.cache;
  const int head_dim = cache.head_dim;
  const int group = params.num_heads / cache.num_kv_heads;
  const int len = params.context_lens[seq];
  const int32_t* table = params.block_tables + int64_t{seq} * params.max_blocks_per_seq;

  const T* k_data = KvData<const T>(cache.k);
  const T* v_data = KvData<const T>(cache.v);
  sc.k_rows.resize(len);
  sc.v_rows.resize(len);
  for (int j0 = 0; j0 < len; j0 += cache.block_size) {  // a block's slots of one head are adjacent
    const int64_t first = KvOffset(cache, int64_t{table[j0 / cache.block_size]} * cache.block_size,
                                   kv_head);
    const int end = std::min(len, j0 + cache.block_size);
    for (int j = j0; j < end; ++j) {
      sc.k_rows[j] = k_data + first + (j - j0) * head_dim;
      sc.v_rows[j] = v_data + first + (j - j0) * head_dim;
    }
  }
  if constexpr (!std::is_same_v<T, float>) {
    sc.wide.resize(2 * size_t{kKeyTile} * head_dim);
    sc.wide_rows.resize(2 * kKeyTile);
  }
  sc.q.resize(static_cast<size_t>(group) * head_dim);
  for (int g = 0; g < group; ++g) {
    const int head = kv_head * group + g;
    const float* q = params.q + int64_t{seq} * params.q_stride + int64_t{head} * head_dim;
    for (int d = 0; d < head_dim; ++d) sc.q[g * head_dim + d] = q[d] * params.scale;
  }
  sc.p.resize(static_cast<size_t>(group) * kKeyTile);
  sc.acc.assign(static_cast<size_t>(group) * head_dim, 0.0f);
  sc.m.assign(group, -INFINITY);
  sc.l.assign(group, 0.0f);
  sc.acc_rows.resize(group);
  for (int g = 0; g < group; ++g) sc.acc_rows[g] = sc.acc.data() + g * head_dim;

  const int row_bytes = head_dim * static_cast<int>(sizeof(T));
#if defined(BATON_PAGED_ATTENTION_AVX512)
  // ScoresVectors and PvBlock prefetch each row a tile ahead as they go; only the first tile's
  // rows are fetched here.
  const bool kernels_prefetch = head_dim <= 16 * 8;
#else
  const bool kernels_prefetch = false;
#endif
  PrefetchRows(sc.k_rows, 0, std::min(len, kKeyTile), row_bytes);
  if (kernels_prefetch) PrefetchRows(sc.v_rows, 0, std::min(len, kKeyTile), row_bytes);
  for (int tile = 0; tile < len; tile += kKeyTile) {
    const int n = std::min(kKeyTile, len - tile);
    const int next_end = std::min(len, tile + n + kKeyTile);
    if (!kernels_prefetch) PrefetchRows(sc.v_rows, tile, tile + n, row_bytes);
    Scores(sc, sc.p.data(), group, tile, n, head_dim);
    if (!kernels_prefetch) PrefetchRows(sc.k_rows, tile + n, next_end, row_bytes);
    for (int g = 0; g < group; ++g) {
      float* p = sc.p.data() + g * kKeyTile;
      const float m_new = std::max(sc.m[g], internal::Max(p, n));
      const float alpha = std::exp(sc.m[g] - m_new);  // 0 on the first tile
      sc.l[g] = sc.l[g] * alpha + internal::ExpShiftSum(p, n, m_new);
      sc.m[g] = m_new;
      if (alpha != 1.0f) internal::Scale(sc.acc_rows[g], alpha, head_dim);
    }
    WeightedValues(sc, sc.p.data(), sc.acc_rows.data(), group, tile, n, head_dim);
  }
  for (int g = 0; g < group; ++g) {
    const int head = kv_head * group + g;
    float* out = params.out + (int64_t{seq} * params.num_heads + head) * head_dim;
    const float inv_l = 1.0f / sc.l[g];
    for (int d = 0; d < head_dim; ++d) out[d] = sc.acc_rows[g][d] * inv_l;
  }
}

absl::Status CheckTables(const PagedAttentionParams& p) {
  const PagedKvView& cache = p.cache;
  const int64_t capacity = int64_t{p.max_blocks_per_seq} * cache.block_size;
  for (int s = 0; s < p.num_seqs; ++s) {
    const int len = p.context_lens[s];
    if (len < 1 || len > capacity) {
      return absl::InvalidArgumentError(
          absl::StrCat("PagedAttentionDecode: sequence ", s, " has context_len ", len,
                       " outside [1, ", capacity, "]"));
    }
    if (cache.num_blocks == 0) continue;
    const int num_blocks_used = (len + cache.block_size - 1) / cache.block_size;
    for (int b = 0; b < num_blocks_used; ++b) {
      const int32_t block_id = p.block_tables[int64_t{s} * p.max_blocks_per_seq + b];
      if (block_id < 0 || block_id >= cache.num_blocks) {
        return absl::InvalidArgumentError(
            absl::StrCat("PagedAttentionDecode: sequence ", s, " block table entry ", b, " = ",
                         block_id, " is outside [0, ", cache.num_blocks, ")"));
      }
    }
  }
  return absl::OkStatus();
}

template <typename T>
void RunAll(const PagedAttentionParams& p, ThreadPool* pool) {
  const int num_kv_heads = p.cache.num_kv_heads;
  // Longest contexts first, so the threads finish together.
  std::vector<int> seq_order(p.num_seqs);
  for (int s = 0; s < p.num_seqs; ++s) seq_order[s] = s;
  std::stable_sort(seq_order.begin(), seq_order.end(),
                   [&](int a, int b) { return p.context_lens[a] > p.context_lens[b]; });
  std::vector<Scratch<T>> scratch(internal::NumThreads(pool));
  internal::ParallelItems(pool, int64_t{p.num_seqs} * num_kv_heads, [&](int64_t i, int thread_idx) {
    RunItem(p, seq_order[i / num_kv_heads], static_cast<int>(i % num_kv_heads),
            scratch[thread_idx]);
  });
}

}  // namespace

absl::Status PagedAttentionDecodeCpu(const PagedAttentionParams& p, ThreadPool* pool) {
  RETURN_IF_ERROR(Validate(p));
  RETURN_IF_ERROR(CheckTables(p));
  if (p.cache.dtype == DType::kBF16) {
    RunAll<uint16_t>(p, pool);
  } else {
    RunAll<float>(p, pool);
  }
  return absl::OkStatus();
}

}  // namespace baton::kernels
