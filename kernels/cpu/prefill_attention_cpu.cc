// Prefill attention on the CPU: flash-style tiles with an online softmax.
//
// A work item is (sequence, kv head, tile of consecutive queries); its rows are every (query, query
// head of that kv head) pair, so the K/V tile is packed once and read by all heads of the group.
// Per key tile: pack K transposed (so scores for consecutive keys are one vector), pack V with
// head_dim padded to a multiple of 16, compute scores with register tiles of 4 rows x 4 vectors
// of keys (AVX-512; 2 on AVX2), update the running max / sum per row, and accumulate P.V with
// tiles of 4 rows x 4 (2) vectors of dims.
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "baton/kernels/prefill_attention.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vec_math.h"

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

#if defined(BATON_SIMD_F32)
using V = internal::SimdF32;
// Vectors per row of a register tile: kRowBlock x kTileVecs accumulators plus kTileVecs loaded
// vectors and a broadcast fit the register file (32 registers on AVX-512, 16 on AVX2).
constexpr int kTileVecs = V::kRegisters >= 32 ? 4 : 2;
static_assert(kKeyTile % (kTileVecs * V::kLanes) == 0);

// s[r .. r+4, j0 .. j0 + kTileVecs*lanes) = q[r .. r+4, :] . kt[:, j0 ..].
void ScoresBlock(const float* q, const float* kt, float* s, int r, int j0, int head_dim) {
  constexpr int NV = kTileVecs;
  V::Reg acc[kRowBlock][NV];
  for (auto& row : acc) {
    for (auto& a : row) a = V::Zero();
  }
  for (int d = 0; d < head_dim; ++d) {
    V::Reg k[NV];
    for (int c = 0; c < NV; ++c) k[c] = V::Load(kt + d * kKeyTile + j0 + c * V::kLanes);
    for (int a = 0; a < kRowBlock; ++a) {
      const V::Reg qa = V::Set1(q[(r + a) * head_dim + d]);
      for (int c = 0; c < NV; ++c) acc[a][c] = V::Fma(qa, k[c], acc[a][c]);
    }
  }
  for (int a = 0; a < kRowBlock; ++a) {
    for (int c = 0; c < NV; ++c) V::Store(s + (r + a) * kKeyTile + j0 + c * V::kLanes, acc[a][c]);
  }
}

// o[r .. r+4, d0 .. d0 + NV*lanes) += p[r .. r+4, :num_keys] . v[:num_keys, d0 ..].
template <int NV>
void PvBlock(const float* p, const float* v, float* o, int r, int d0, int dim_pad, int num_keys) {
  V::Reg acc[kRowBlock][NV];
  for (int a = 0; a < kRowBlock; ++a) {
    for (int c = 0; c < NV; ++c) acc[a][c] = V::Load(o + (r + a) * dim_pad + d0 + c * V::kLanes);
  }
  for (int j = 0; j < num_keys; ++j) {
    V::Reg vv[NV];
    for (int c = 0; c < NV; ++c) vv[c] = V::Load(v + j * dim_pad + d0 + c * V::kLanes);
    for (int a = 0; a < kRowBlock; ++a) {
      const V::Reg pa = V::Set1(p[(r + a) * kKeyTile + j]);
      for (int c = 0; c < NV; ++c) acc[a][c] = V::Fma(pa, vv[c], acc[a][c]);
    }
  }
  for (int a = 0; a < kRowBlock; ++a) {
    for (int c = 0; c < NV; ++c) V::Store(o + (r + a) * dim_pad + d0 + c * V::kLanes, acc[a][c]);
  }
}

// PvBlock<rest> for the last rest (< kTileVecs) vectors of a row.
template <int NV>
void PvLastVecs(int rest, const float* p, const float* v, float* o, int r, int d0, int dim_pad,
                int num_keys) {
  if constexpr (NV > 0) {
    if (rest == NV) {
      PvBlock<NV>(p, v, o, r, d0, dim_pad, num_keys);
    } else {
      PvLastVecs<NV - 1>(rest, p, v, o, r, d0, dim_pad, num_keys);
    }
  }
}
#endif  // BATON_SIMD_F32

// s[r, :] = q[r, :] . kt[:, :] for r < num_rows_pad (a multiple of kRowBlock).
void ScoresTile(const float* q, const float* kt, float* s, int num_rows_pad, int head_dim) {
  for (int r = 0; r < num_rows_pad; r += kRowBlock) {
#if defined(BATON_SIMD_F32)
    for (int j0 = 0; j0 < kKeyTile; j0 += kTileVecs * V::kLanes) {
      ScoresBlock(q, kt, s, r, j0, head_dim);
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

// o[r, :] += p[r, :num_keys] . v[:num_keys, :] for r < num_rows_pad (dim_pad a multiple of 16).
void PvTile(const float* p, const float* v, float* o, int num_rows_pad, int dim_pad,
            int num_keys) {
  for (int r = 0; r < num_rows_pad; r += kRowBlock) {
#if defined(BATON_SIMD_F32)
    int d0 = 0;
    for (; d0 + kTileVecs * V::kLanes <= dim_pad; d0 += kTileVecs * V::kLanes) {
      PvBlock<kTileVecs>(p, v, o, r, d0, dim_pad, num_keys);
    }
    PvLastVecs<kTileVecs - 1>((dim_pad - d0) / V::kLanes, p, v, o, r, d0, dim_pad, num_keys);
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
