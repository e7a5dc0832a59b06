// Prefill attention on the CPU: flash-style tiles with an online softmax.
//
// A work item is (sequence, kv head, tile of consecutive queries); its rows are every (query, query
// head of that kv head) pair, so the K/V tile is packed once and read by all heads of the group.
// Per key tile: pack K transposed (so scores for 16 keys are one vector), pack V with head_dim
// padded to a multiple of 16, compute scores with a 4-row x 64-key register tile, update the
// running max / sum per row, and accumulate P.V with a 4-row x 64-dim register tile.
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "baton/kernels/prefill_attention.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vec_math.h"
#include "runtime/common/status_macros.h"

namespace baton::kernels {

namespace {

constexpr int kKeyTile = 64;     // keys per tile: 4 vectors of scores
constexpr int kRowBlock = 4;     // rows per micro-kernel step
constexpr int kTargetRows = 64;  // rows (queries x heads) per work item, about

int RoundUp(int x, int multiple) { return (x + multiple - 1) / multiple * multiple; }

struct Scratch {
  std::vector<float> q;   // [num_rows_pad, head_dim], pre-multiplied by scale
  std::vector<float> kt;  // [head_dim, kKeyTile]: the key tile, transposed
  std::vector<float> v;   // [kKeyTile, dim_pad]: the value tile, dims zero-padded
  std::vector<float> s;   // [num_rows_pad, kKeyTile]: scores, then probabilities
  std::vector<float> o;   // [num_rows_pad, dim_pad]: unnormalized output accumulators
  std::vector<float> m;   // [num_rows_pad]: running max of the scores
  std::vector<float> l;   // [num_rows_pad]: running sum of exp(score - m)
};

struct WorkItem {
  int seq;
  int kv_head;
  int q_begin;  // query index inside the sequence
  int q_end;
  int64_t cost;
};

// s[r, :] = q[r, :] . kt[:, :] for r < num_rows_pad (a multiple of kRowBlock).
void ScoresTile(const float* q, const float* kt, float* s, int num_rows_pad, int head_dim) {
  for (int r = 0; r < num_rows_pad; r += kRowBlock) {
#if defined(__AVX512F__)
    __m512 acc[kRowBlock][4];
    for (auto& row : acc) {
      for (auto& a : row) a = _mm512_setzero_ps();
    }
    for (int d = 0; d < head_dim; ++d) {
      const float* kd = kt + d * kKeyTile;
      const __m512 k0 = _mm512_loadu_ps(kd);
      const __m512 k1 = _mm512_loadu_ps(kd + 16);
      const __m512 k2 = _mm512_loadu_ps(kd + 32);
      const __m512 k3 = _mm512_loadu_ps(kd + 48);
      for (int a = 0; a < kRowBlock; ++a) {
        const __m512 qa = _mm512_set1_ps(q[(r + a) * head_dim + d]);
        acc[a][0] = _mm512_fmadd_ps(qa, k0, acc[a][0]);
        acc[a][1] = _mm512_fmadd_ps(qa, k1, acc[a][1]);
        acc[a][2] = _mm512_fmadd_ps(qa, k2, acc[a][2]);
        acc[a][3] = _mm512_fmadd_ps(qa, k3, acc[a][3]);
      }
    }
    for (int a = 0; a < kRowBlock; ++a) {
      for (int c = 0; c < 4; ++c) _mm512_storeu_ps(s + (r + a) * kKeyTile + 16 * c, acc[a][c]);
    }
#else
    for (int a = 0; a < kRowBlock; ++a) {
      float* srow = s + (r + a) * kKeyTile;
      std::fill(srow, srow + kKeyTile, 0.0f);
      for (int d = 0; d < head_dim; ++d) {
        const float qd = q[(r + a) * head_dim + d];
        for (int j = 0; j < kKeyTile; ++j) srow[j] += qd * kt[d * kKeyTile + j];
      }
    }
#endif
  }
}

#if defined(__AVX512F__)
// o[r .. r+4, d0 .. d0+16*NV) += p[r .. r+4, :num_keys] . v[:num_keys, d0 .. d0+16*NV).
template <int NV>
void PvBlock(const float* p, const float* v, float* o, int r, int d0, int dim_pad, int num_keys) {
  __m512 acc[kRowBlock][NV];
  for (int a = 0; a < kRowBlock; ++a) {
    for (int c = 0; c < NV; ++c) acc[a][c] = _mm512_loadu_ps(o + (r + a) * dim_pad + d0 + 16 * c);
  }
  for (int j = 0; j < num_keys; ++j) {
    __m512 vv[NV];
    for (int c = 0; c < NV; ++c) vv[c] = _mm512_loadu_ps(v + j * dim_pad + d0 + 16 * c);
    for (int a = 0; a < kRowBlock; ++a) {
      const __m512 pa = _mm512_set1_ps(p[(r + a) * kKeyTile + j]);
      for (int c = 0; c < NV; ++c) acc[a][c] = _mm512_fmadd_ps(pa, vv[c], acc[a][c]);
    }
  }
  for (int a = 0; a < kRowBlock; ++a) {
    for (int c = 0; c < NV; ++c) _mm512_storeu_ps(o + (r + a) * dim_pad + d0 + 16 * c, acc[a][c]);
  }
}
#endif

// o[r, :] += p[r, :num_keys] . v[:num_keys, :] for r < num_rows_pad.
void PvTile(const float* p, const float* v, float* o, int num_rows_pad, int dim_pad,
            int num_keys) {
  for (int r = 0; r < num_rows_pad; r += kRowBlock) {
#if defined(__AVX512F__)
    int d0 = 0;
    for (; d0 + 64 <= dim_pad; d0 += 64) PvBlock<4>(p, v, o, r, d0, dim_pad, num_keys);
    switch ((dim_pad - d0) / 16) {
      case 3: PvBlock<3>(p, v, o, r, d0, dim_pad, num_keys); break;
      case 2: PvBlock<2>(p, v, o, r, d0, dim_pad, num_keys); break;
      case 1: PvBlock<1>(p, v, o, r, d0, dim_pad, num_keys); break;
      default: break;
    }
#else
    for (int a = 0; a < kRowBlock; ++a) {
      for (int j = 0; j < num_keys; ++j) {
        internal::Axpy(o + (r + a) * dim_pad, v + j * dim_pad, p[(r + a) * kKeyTile + j], dim_pad);
      }
    }
#endif
  }
}

void RunItem(const PrefillAttentionParams& p, const WorkItem& item, Scratch& sc) {
  const int head_dim = p.head_dim;
  const int group = p.num_heads / p.num_kv_heads;
  const int dim_pad = RoundUp(head_dim, 16);
  const int q_len = p.q_start[item.seq + 1] - p.q_start[item.seq];
  const int kv_len = p.kv_start[item.seq + 1] - p.kv_start[item.seq];
  const int offset = kv_len - q_len;  // query i sees keys [0, offset + i]
  const int num_rows = (item.q_end - item.q_begin) * group;
  const int num_rows_pad = RoundUp(num_rows, kRowBlock);

  sc.q.assign(static_cast<size_t>(num_rows_pad) * head_dim, 0.0f);
  sc.kt.resize(static_cast<size_t>(head_dim) * kKeyTile);
  sc.v.resize(static_cast<size_t>(kKeyTile) * dim_pad);
  sc.s.resize(static_cast<size_t>(num_rows_pad) * kKeyTile);
  sc.o.assign(static_cast<size_t>(num_rows_pad) * dim_pad, 0.0f);
  sc.m.assign(num_rows_pad, -INFINITY);
  sc.l.assign(num_rows_pad, 0.0f);

  // Row r is query q_begin + r / group of head kv_head * group + r % group.
  for (int r = 0; r < num_rows; ++r) {
    const int64_t q_row = p.q_start[item.seq] + item.q_begin + r / group;
    const float* src =
        p.q + q_row * p.q_stride + int64_t{item.kv_head * group + r % group} * head_dim;
    for (int d = 0; d < head_dim; ++d) sc.q[r * head_dim + d] = src[d] * p.scale;
  }
  const float* k_seq = p.k + int64_t{p.kv_start[item.seq]} * p.kv_stride +
                       int64_t{item.kv_head} * head_dim;
  const float* v_seq = p.v + int64_t{p.kv_start[item.seq]} * p.kv_stride +
                       int64_t{item.kv_head} * head_dim;
  const int num_keys_total = offset + item.q_end;  // the last query's keys

  for (int j0 = 0; j0 < num_keys_total; j0 += kKeyTile) {
    const int num_keys = std::min(kKeyTile, num_keys_total - j0);
    std::fill(sc.kt.begin(), sc.kt.end(), 0.0f);
    std::fill(sc.v.begin(), sc.v.end(), 0.0f);
    for (int j = 0; j < num_keys; ++j) {
      const float* k_row = k_seq + int64_t{j0 + j} * p.kv_stride;
      const float* v_row = v_seq + int64_t{j0 + j} * p.kv_stride;
      for (int d = 0; d < head_dim; ++d) sc.kt[d * kKeyTile + j] = k_row[d];
      std::copy(v_row, v_row + head_dim, sc.v.begin() + j * dim_pad);
    }
    ScoresTile(sc.q.data(), sc.kt.data(), sc.s.data(), num_rows_pad, head_dim);
    for (int r = 0; r < num_rows_pad; ++r) {
      float* s_row = sc.s.data() + r * kKeyTile;
      const int query = item.q_begin + r / group;
      const int allowed =
          r < num_rows ? std::clamp(offset + query + 1 - j0, 0, num_keys) : 0;
      if (allowed == 0) {
        std::fill(s_row, s_row + kKeyTile, 0.0f);
        continue;
      }
      const float m_new = std::max(sc.m[r], internal::Max(s_row, allowed));
      const float alpha = std::exp(sc.m[r] - m_new);  // exp(-inf) = 0 on the first tile
      const float row_sum = internal::ExpShiftSum(s_row, allowed, m_new);
      std::fill(s_row + allowed, s_row + kKeyTile, 0.0f);
      sc.l[r] = sc.l[r] * alpha + row_sum;
      sc.m[r] = m_new;
      if (alpha != 1.0f) internal::Scale(sc.o.data() + r * dim_pad, alpha, dim_pad);
    }
    PvTile(sc.s.data(), sc.v.data(), sc.o.data(), num_rows_pad, dim_pad, num_keys);
  }

  for (int r = 0; r < num_rows; ++r) {
    const int64_t q_row = p.q_start[item.seq] + item.q_begin + r / group;
    float* dst = p.out + q_row * p.num_heads * head_dim +
                 int64_t{item.kv_head * group + r % group} * head_dim;
    const float inv_l = 1.0f / sc.l[r];
    for (int d = 0; d < head_dim; ++d) dst[d] = sc.o[r * dim_pad + d] * inv_l;
  }
}

absl::Status CheckOffsets(const PrefillAttentionParams& p) {
  if (p.q_start[0] != 0 || p.kv_start[0] != 0) {
    return absl::InvalidArgumentError("PrefillAttention: q_start[0] and kv_start[0] must be 0");
  }
  for (int s = 0; s < p.num_seqs; ++s) {
    const int q_len = p.q_start[s + 1] - p.q_start[s];
    const int kv_len = p.kv_start[s + 1] - p.kv_start[s];
    if (q_len < 0 || kv_len < 0 || q_len > kv_len) {
      return absl::InvalidArgumentError(absl::StrCat("PrefillAttention: sequence ", s, " has q_len ",
                                                     q_len, " and kv_len ", kv_len,
                                                     " (need 0 <= q_len <= kv_len)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status PrefillAttentionCpu(const PrefillAttentionParams& p, ThreadPool* pool) {
  RETURN_IF_ERROR(Validate(p));
  RETURN_IF_ERROR(CheckOffsets(p));
  const int group = p.num_heads / p.num_kv_heads;
  const int q_tile = std::max(1, kTargetRows / group);
  std::vector<WorkItem> items;
  for (int s = 0; s < p.num_seqs; ++s) {
    const int q_len = p.q_start[s + 1] - p.q_start[s];
    const int offset = (p.kv_start[s + 1] - p.kv_start[s]) - q_len;
    for (int q0 = 0; q0 < q_len; q0 += q_tile) {
      const int q1 = std::min(q_len, q0 + q_tile);
      for (int g = 0; g < p.num_kv_heads; ++g) {
        items.push_back({.seq = s,
                         .kv_head = g,
                         .q_begin = q0,
                         .q_end = q1,
                         .cost = int64_t{q1 - q0} * (offset + q1)});
      }
    }
  }
  // Most expensive first, so the threads finish together.
  std::stable_sort(items.begin(), items.end(),
                   [](const WorkItem& a, const WorkItem& b) { return a.cost > b.cost; });
  std::vector<Scratch> scratch(internal::NumThreads(pool));
  internal::ParallelItems(pool, static_cast<int64_t>(items.size()),
                          [&](int64_t i, int thread_idx) { RunItem(p, items[i], scratch[thread_idx]); });
  return absl::OkStatus();
}

}  // namespace baton::kernels
