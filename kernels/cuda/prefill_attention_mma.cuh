// Prefill attention on tensor cores: bf16 mma.sync.m16n8k16 with f32 accumulation, FlashAttention-2's
// split of the work. One block per (tile of 64 queries, query head, sequence); each of its 4 warps
// owns 16 query rows and keeps their Q fragments (bf16) in registers. For each tile of 32 keys,
// which the block stages in shared memory (K and V rounded to bf16), every warp
//   1. computes S = Q K^T (16 x 32) on tensor cores, then scales and causally masks it in f32;
//   2. runs the online softmax on S's accumulator fragments: a lane holds two rows (g and g + 8),
//      and the 4 lanes of a group hold a row between them, so a row's max and sum take two
//      shuffles; the output accumulators are rescaled in registers;
//   3. adds P V on tensor cores, with P's accumulator fragments reused, rounded to bf16, as the A
//      fragments of the product (FA2's register trick: P never goes through shared memory).
// The rounding of q, k, v and p to bf16 is what tensor cores take; the CPU twin and the f32 kernel
// keep f32, so this kernel agrees with them within bf16's tolerance, not bit for bit, and runs only
// when PrefillAttentionParams::allow_bf16_tensor_cores says so (bf16 models). head_dim 64 or 128.
// Shared memory: 2 * 32 * (head_dim + 8) bf16 (17 KiB at 128; the pad staggers banks).
#pragma once

#include <cmath>
#include <cstdint>

#include "baton/kernels/host_device.h"
#include "baton/kernels/prefill_attention.h"
#include "kernels/simt/device.h"

namespace baton::kernels::cuda_detail {

inline constexpr int kMmaWarps = 4;
inline constexpr int kMmaQueryRows = 16 * kMmaWarps;  // queries per block
inline constexpr int kMmaKeys = 32;                   // keys per shared-memory tile
inline constexpr int kMmaRowPad = 8;                  // bf16 after each staged row

BATON_HOST_DEVICE inline bool PrefillMmaSupportsHeadDim(int head_dim) {
  return head_dim == 64 || head_dim == 128;
}

// Which kernel a launch takes: this one when the params allow bf16 and its head_dim is one it has.
inline bool UsesTensorCores(const PrefillAttentionParams& p) {
  return p.allow_bf16_tensor_cores && PrefillMmaSupportsHeadDim(p.head_dim);
}

inline simt::LaunchShape PrefillAttentionMmaLaunchShape(const PrefillAttentionParams& p) {
  simt::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>((p.max_q_len + kMmaQueryRows - 1) / kMmaQueryRows);
  shape.grid_y = static_cast<unsigned>(p.num_heads);
  shape.grid_z = static_cast<unsigned>(p.num_seqs);
  shape.block_x = kMmaWarps * simt::kWarpSize;
  return shape;
}

// Two adjacent elements of row `row` of q (columns col and col + 1) as a bf16 pair; zeros for a
// row past the sequence's queries.
BATON_DEVICE uint32_t LoadQueryPair(const PrefillAttentionParams& p, int64_t q_row0, int q_len,
                                    int head_offset, int row, int col) {
  if (row >= q_len) return 0;
  const float* x = p.q + (q_row0 + row) * p.q_stride + head_offset + col;
  return simt::PackBf16(simt::FloatToBf16Bits(x[0]), simt::FloatToBf16Bits(x[1]));
}

BATON_DEVICE float GroupMax(float value) {  // over the 4 lanes that hold a row
  value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, 1));
  return fmaxf(value, __shfl_xor_sync(0xffffffffu, value, 2));
}

BATON_DEVICE float GroupSum(float value) {
  value += __shfl_xor_sync(0xffffffffu, value, 1);
  return value + __shfl_xor_sync(0xffffffffu, value, 2);
}

template <int kHeadDim>
BATON_GLOBAL void PrefillAttentionMmaKernel(PrefillAttentionParams p) {
  constexpr int kRow = kHeadDim + kMmaRowPad;  // staged row stride, in bf16
  constexpr int kDimSteps = kHeadDim / 16;     // k-steps of Q K^T
  constexpr int kDimTiles = kHeadDim / 8;      // n-tiles of P V
  constexpr int kKeyTiles = kMmaKeys / 8;      // n-tiles of Q K^T
  constexpr int kKeySteps = kMmaKeys / 16;     // k-steps of P V
  BATON_SHARED_ARRAY(uint16_t, k_s, kMmaKeys * kRow);
  BATON_SHARED_ARRAY(uint16_t, v_s, kMmaKeys * kRow);

  const int seq = static_cast<int>(blockIdx.z);
  const int head = static_cast<int>(blockIdx.y);
  const int q_begin = static_cast<int>(blockIdx.x) * kMmaQueryRows;
  const int q_len = p.q_start[seq + 1] - p.q_start[seq];
  const int kv_len = p.kv_start[seq + 1] - p.kv_start[seq];
  if (q_begin >= q_len) return;  // the whole block leaves before any barrier
  const int offset = kv_len - q_len;  // query i sees keys [0, offset + i]
  const int kv_head = head / (p.num_heads / p.num_kv_heads);
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % simt::kWarpSize;
  const int g = lane / 4;  // the fragments' groupID
  const int t = lane % 4;  // threadID_in_group
  // The two query rows this lane holds, as indices into the sequence's queries.
  const int row_a = q_begin + (tid / simt::kWarpSize) * 16 + g;
  const int rows[2] = {row_a, row_a + 8};

  const int64_t q_row0 = p.q_start[seq];
  uint32_t q_frag[kDimSteps][4];
  BATON_UNROLL
  for (int ks = 0; ks < kDimSteps; ++ks) {
    const int col = 16 * ks + 2 * t;
    q_frag[ks][0] = LoadQueryPair(p, q_row0, q_len, head * kHeadDim, rows[0], col);
    q_frag[ks][1] = LoadQueryPair(p, q_row0, q_len, head * kHeadDim, rows[1], col);
    q_frag[ks][2] = LoadQueryPair(p, q_row0, q_len, head * kHeadDim, rows[0], col + 8);
    q_frag[ks][3] = LoadQueryPair(p, q_row0, q_len, head * kHeadDim, rows[1], col + 8);
  }
  float o[kDimTiles][4];
  BATON_UNROLL
  for (int dn = 0; dn < kDimTiles; ++dn) {
    BATON_UNROLL
    for (int i = 0; i < 4; ++i) o[dn][i] = 0.0f;
  }
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};

  const int block_rows = q_len - q_begin < kMmaQueryRows ? q_len - q_begin : kMmaQueryRows;
  const int num_keys = offset + q_begin + block_rows;  // keys the block's last query sees
  const int64_t kv_row0 = p.kv_start[seq];
  for (int j0 = 0; j0 < num_keys; j0 += kMmaKeys) {
    __syncthreads();  // every warp is done with the previous tile
    for (int i = tid; i < kMmaKeys * kHeadDim; i += kMmaWarps * simt::kWarpSize) {
      const int key = i / kHeadDim;
      const int d = i % kHeadDim;
      const bool valid = j0 + key < num_keys;
      const int64_t src = (kv_row0 + j0 + key) * p.kv_stride + int64_t{kv_head} * kHeadDim + d;
      k_s[key * kRow + d] = valid ? simt::FloatToBf16Bits(p.k[src]) : uint16_t{0};
      v_s[key * kRow + d] = valid ? simt::FloatToBf16Bits(p.v[src]) : uint16_t{0};
    }
    __syncthreads();

    // 1. S = Q K^T: B[k = dim][n = key] is K's row `key`, so a lane's pair is adjacent there.
    float s[kKeyTiles][4];
    BATON_UNROLL
    for (int nt = 0; nt < kKeyTiles; ++nt) {
      BATON_UNROLL
      for (int i = 0; i < 4; ++i) s[nt][i] = 0.0f;
      const uint16_t* k_row = k_s + (8 * nt + g) * kRow + 2 * t;
      BATON_UNROLL
      for (int ks = 0; ks < kDimSteps; ++ks) {
        const uint32_t k_frag[2] = {simt::PackBf16(k_row[16 * ks], k_row[16 * ks + 1]),
                                    simt::PackBf16(k_row[16 * ks + 8], k_row[16 * ks + 9])};
        simt::MmaM16N8K16Bf16(s[nt], q_frag[ks], k_frag, s[nt]);
      }
    }
    // 2. Scale, mask, online softmax. Element i of a tile: row rows[i / 2], key 8 nt + 2t + (i & 1).
    float tile_max[2] = {-INFINITY, -INFINITY};
    BATON_UNROLL
    for (int nt = 0; nt < kKeyTiles; ++nt) {
      BATON_UNROLL
      for (int i = 0; i < 4; ++i) {
        const int row = rows[i / 2];
        const int key = j0 + 8 * nt + 2 * t + (i & 1);
        const bool visible = row < q_len && key <= offset + row;
        s[nt][i] = visible ? s[nt][i] * p.scale : -INFINITY;
        tile_max[i / 2] = fmaxf(tile_max[i / 2], s[nt][i]);
      }
    }
    float rescale[2];
    BATON_UNROLL
    for (int r = 0; r < 2; ++r) {
      const float new_max = fmaxf(row_max[r], GroupMax(tile_max[r]));
      // A row that has seen no key yet (a padding row) stays empty: exp(-inf - -inf) is NaN.
      rescale[r] = new_max == -INFINITY ? 1.0f : expf(row_max[r] - new_max);
      row_max[r] = new_max;
    }
    float tile_sum[2] = {0.0f, 0.0f};
    BATON_UNROLL
    for (int nt = 0; nt < kKeyTiles; ++nt) {
      BATON_UNROLL
      for (int i = 0; i < 4; ++i) {
        const float m = row_max[i / 2];
        s[nt][i] = m == -INFINITY ? 0.0f : expf(s[nt][i] - m);  // masked: exp(-inf) = 0
        tile_sum[i / 2] += s[nt][i];
      }
    }
    BATON_UNROLL
    for (int r = 0; r < 2; ++r) row_sum[r] = row_sum[r] * rescale[r] + GroupSum(tile_sum[r]);
    BATON_UNROLL
    for (int dn = 0; dn < kDimTiles; ++dn) {
      o[dn][0] *= rescale[0];
      o[dn][1] *= rescale[0];
      o[dn][2] *= rescale[1];
      o[dn][3] *= rescale[1];
    }
    // 3. O += P V: S's tiles 2kk and 2kk + 1 are, element for element, the A fragment of keys
    // [16kk, 16kk + 16); B[k = key][n = dim] takes a lane's pair from two rows of V.
    BATON_UNROLL
    for (int kk = 0; kk < kKeySteps; ++kk) {
      const float* lo = s[2 * kk];
      const float* hi = s[2 * kk + 1];
      const uint32_t p_frag[4] = {
          simt::PackBf16(simt::FloatToBf16Bits(lo[0]), simt::FloatToBf16Bits(lo[1])),
          simt::PackBf16(simt::FloatToBf16Bits(lo[2]), simt::FloatToBf16Bits(lo[3])),
          simt::PackBf16(simt::FloatToBf16Bits(hi[0]), simt::FloatToBf16Bits(hi[1])),
          simt::PackBf16(simt::FloatToBf16Bits(hi[2]), simt::FloatToBf16Bits(hi[3]))};
      const uint16_t* v_rows = v_s + (16 * kk + 2 * t) * kRow + g;
      BATON_UNROLL
      for (int dn = 0; dn < kDimTiles; ++dn) {
        const uint16_t* v = v_rows + 8 * dn;
        const uint32_t v_frag[2] = {simt::PackBf16(v[0], v[kRow]),
                                    simt::PackBf16(v[8 * kRow], v[9 * kRow])};
        simt::MmaM16N8K16Bf16(o[dn], p_frag, v_frag, o[dn]);
      }
    }
  }

  const int out_stride = p.num_heads * kHeadDim;
  BATON_UNROLL
  for (int r = 0; r < 2; ++r) {
    if (rows[r] >= q_len) continue;
    const float inv_sum = 1.0f / row_sum[r];
    float* out = p.out + (q_row0 + rows[r]) * out_stride + int64_t{head} * kHeadDim + 2 * t;
    BATON_UNROLL
    for (int dn = 0; dn < kDimTiles; ++dn) {
      out[8 * dn] = o[dn][2 * r] * inv_sum;
      out[8 * dn + 1] = o[dn][2 * r + 1] * inv_sum;
    }
  }
}

}  // namespace baton::kernels::cuda_detail
