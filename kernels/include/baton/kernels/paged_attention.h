// Decode attention: one query token per sequence attending to the sequence's cached tokens, which
// live in the paged KV cache (see paged_kv.h) and are reached through the sequence's block table.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "baton/kernels/paged_kv.h"
#include "kernels/common/thread_pool.h"

namespace baton::kernels {

struct PagedAttentionParams {
  float* out;                   // [num_seqs, num_heads * head_dim]
  const float* q;               // [num_seqs, q_stride] holding [num_heads, head_dim]
  PagedKvView cache;            // one layer's K/V blocks
  const int32_t* block_tables;  // [num_seqs, max_blocks_per_seq]; entry j = block of tokens
                                // [j * block_size, (j + 1) * block_size)
  const int32_t* context_lens;  // [num_seqs], >= 1 and <= max_blocks_per_seq * block_size; counts
                                // the query's own token, whose K/V must already be written
  int num_seqs;
  int num_heads;  // multiple of cache.num_kv_heads; query head h reads kv head
                  // h / (num_heads / num_kv_heads)
  int max_blocks_per_seq;
  int q_stride;  // >= num_heads * cache.head_dim
  float scale;   // usually 1 / sqrt(head_dim)
};

// Checks the cache view, pointers, head divisibility and strides. Does not read the tables.
absl::Status Validate(const PagedAttentionParams& params);

// Validates, then checks context_lens (and, if cache.num_blocks > 0, the block ids actually used)
// and returns InvalidArgument naming the sequence on a bad entry; then
// out = softmax(q k^T * scale) v over each sequence's context, f32 accumulation. Only slots
// [0, context_lens[i]) of the sequence are read. `pool` may be nullptr.
absl::Status PagedAttentionDecodeCpu(const PagedAttentionParams& params, ThreadPool* pool);

}  // namespace baton::kernels
