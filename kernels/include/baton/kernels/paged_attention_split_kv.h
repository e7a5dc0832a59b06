// Split-KV ("flash-decoding") paged decode attention: the same attention as paged_attention.h, with
// each sequence's context cut into splits of a fixed number of KV blocks so that a GPU has more
// than (sequences x heads) blocks of work when that product is smaller than its SM count and the
// contexts are long. Pass 1 computes, per (sequence, query head, split), the softmax-weighted sum
// of the split's values with the split's own running max and sum (flash-attention statistics)
// into a device workspace; pass 2 merges the splits of each (sequence, head) by log-sum-exp:
//   M = max_s m_s,  out = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s.
// The CPU twin is PagedAttentionDecodeCpu; results agree with it within f32 rounding.
//
// Choosing the split count is the caller's: PagedAttentionSplitKvNumSplits() is the heuristic the
// GPU backend uses, PagedAttentionSplitKvWorkspaceBytes() the workspace that count needs. Both
// read only host-side fields of the params (never the device tables): the longest context is
// bounded by max_blocks_per_seq * block_size.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "baton/kernels/host_device.h"
#include "baton/kernels/paged_attention.h"

namespace baton::kernels {

struct PagedAttentionSplitKvParams {
  PagedAttentionParams attn;  // the attention; its semantics and Validate() unchanged
  // PagedAttentionSplitKvWorkspaceBytes(attn, num_splits) bytes, laid out as
  // PagedAttentionSplitKvLayout says; scratch, its contents need not be initialized.
  float* workspace;
  int num_splits;  // in [1, attn.max_blocks_per_seq]; 1 is plain decode plus a merge of one split
};

// Keys per split never fall below this (but a split is whole blocks): shorter splits would spend
// more on writing and merging partial results than they save.
inline constexpr int kSplitKvMinTokensPerSplit = 256;
// Bounds the workspace and the merge's loop.
inline constexpr int kSplitKvMaxSplits = 64;
// The split count aims at this many blocks of work per SM, so that each SM has a second block to
// switch to while the first waits on memory.
inline constexpr int kSplitKvTargetBlocksPerSm = 2;

// Where the partial results of pass 1 sit in the workspace, in floats:
//   acc [num_seqs, num_heads, num_splits, head_dim]  un-normalized sum_j e^(score_j - m) v_j
//   max [num_seqs, num_heads, num_splits]            m: the split's max score (scaled)
//   sum [num_seqs, num_heads, num_splits]            l: sum_j e^(score_j - m)
// Entries of splits that start past a sequence's context are neither written nor read.
struct PagedAttentionSplitKvLayout {
  int num_splits;
  int blocks_per_split;  // ceil(max_blocks_per_seq / num_splits): KV blocks per split
  int head_dim;
  int64_t max_offset;  // floats before `max`
  int64_t sum_offset;  // floats before `sum`
  int64_t num_floats;  // the whole workspace

  // Index (in splits) of (seq, head, split 0) in every array.
  BATON_HOST_DEVICE int64_t Row(int seq, int head, int num_heads) const {
    return (int64_t{seq} * num_heads + head) * num_splits;
  }
};

// Pre-condition: Validate(params) passes and num_splits >= 1.
BATON_HOST_DEVICE inline PagedAttentionSplitKvLayout SplitKvLayout(const PagedAttentionParams& p,
                                                                   int num_splits) {
  PagedAttentionSplitKvLayout layout;
  layout.num_splits = num_splits;
  layout.blocks_per_split = (p.max_blocks_per_seq + num_splits - 1) / num_splits;
  layout.head_dim = p.cache.head_dim;
  const int64_t rows = int64_t{p.num_seqs} * p.num_heads * num_splits;
  layout.max_offset = rows * p.cache.head_dim;
  layout.sum_offset = layout.max_offset + rows;
  layout.num_floats = layout.sum_offset + rows;
  return layout;
}

// Bytes of workspace for `num_splits` splits; 0 when num_seqs == 0. Pre-condition: Validate(params)
// passes and num_splits >= 1.
size_t PagedAttentionSplitKvWorkspaceBytes(const PagedAttentionParams& params, int num_splits);

// The heuristic: 1 (no split: plain PagedAttentionDecode) unless the unsplit grid of
// num_seqs * num_heads blocks is smaller than `num_sms`; then enough splits to give every SM
// kSplitKvTargetBlocksPerSm blocks, but no split shorter than kSplitKvMinTokensPerSplit keys of the
// longest possible context (max_blocks_per_seq * block_size) and at most kSplitKvMaxSplits. The
// count is rounded down to one where every split holds at least one block of that context, so no
// slice of the grid is idle for every sequence. `num_sms` <= 0 (unknown) gives 1.
// Pre-condition: Validate(params) passes.
int PagedAttentionSplitKvNumSplits(const PagedAttentionParams& params, int num_sms);

// Validate(attn), then num_splits in [1, min(attn.max_blocks_per_seq, kSplitKvMaxSplits)] and a
// non-null workspace (unless num_seqs == 0).
absl::Status Validate(const PagedAttentionSplitKvParams& params);

}  // namespace baton::kernels
