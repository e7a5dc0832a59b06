// KV gather: copies sequences' cached K and V out of the paged cache (see paged_kv.h) into
// contiguous rows, the inverse of KvWrite. Prefill attention reads keys and values as rows, so a
// prompt chunk whose sequence already has tokens in the cache (a cached prefix, or an earlier chunk
// of a chunked prefill) gathers its whole context this way first.
//
// Sequence s fills rows [out_start[s], out_start[s+1]) with its tokens 0 .. len-1 in order
// (len = out_start[s+1] - out_start[s]), reading token j from slot
// block_tables[s][j / block_size] * block_size + j % block_size.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "baton/kernels/paged_kv.h"
#include "kernels/common/thread_pool.h"

namespace baton::kernels {

struct KvGatherParams {
  float* k_out;                 // [num_rows, out_stride] holding [num_kv_heads, head_dim]
  float* v_out;                 // [num_rows, out_stride] holding [num_kv_heads, head_dim]
  PagedKvView cache;
  const int32_t* block_tables;  // [num_seqs, max_blocks_per_seq] physical block ids
  const int32_t* out_start;     // [num_seqs + 1] prefix sums, out_start[0] == 0
  int num_seqs;
  int max_blocks_per_seq;
  int out_stride;  // elements between consecutive rows of k_out and v_out, >= num_kv_heads*head_dim
  // >= every sequence's len. Needed only by the CUDA launcher, which sizes its grid with it
  // (out_start lives on the device there); the CPU ignores it.
  int max_len = 0;
};

// Checks the cache view, pointers (which may be null only when num_seqs == 0), sizes and strides.
// Does not read block_tables or out_start (they may live on a device).
absl::Status Validate(const KvGatherParams& params);

// Validates, then checks out_start (starts at 0, non-decreasing, len <= max_blocks_per_seq *
// block_size) and, if cache.num_blocks > 0, every block id read; InvalidArgument naming the first
// bad sequence, before writing anything. Then copies one head_dim run per (token, kv head), split
// over `pool` (may be nullptr). Reads no slot beyond a sequence's len; writes only the first
// num_kv_heads*head_dim elements of each row.
absl::Status KvGatherCpu(const KvGatherParams& params, ThreadPool* pool);

}  // namespace baton::kernels
