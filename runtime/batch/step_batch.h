// StepBatch: the flattened input of one forward pass over several sequences.
//
// Sequences are laid out one after another in the token arrays. The first num_decode_seqs sequences
// are decode steps: one new token each, attending to their cached context through the block tables.
// The rest are prefill chunks: q_len new tokens each, attending causally to the sequence's whole
// context (cached prefix, if any, plus the chunk). Every new token's K/V is written to slot_mapping.
// Views only: the builder (ModelRunner) owns the arrays and keeps them alive during Forward().
#pragma once

#include <cstdint>
#include <span>

namespace baton::runtime {

struct StepBatch {
  std::span<const int32_t> token_ids;     // [num_tokens]
  std::span<const int32_t> positions;     // [num_tokens] position of each token in its sequence
  std::span<const int32_t> slot_mapping;  // [num_tokens] block_id * block_size + slot
  std::span<const int32_t> q_start;       // [num_seqs + 1] prefix sums of each sequence's new tokens
  std::span<const int32_t> context_lens;  // [num_seqs] tokens in the cache after this step
  std::span<const int32_t> block_tables;  // [num_seqs, max_blocks_per_seq], padded with 0
  int num_decode_seqs = 0;
  int max_blocks_per_seq = 0;

  int num_tokens() const { return static_cast<int>(token_ids.size()); }
  int num_seqs() const { return static_cast<int>(context_lens.size()); }
};

}  // namespace baton::runtime
