// A hand-built forward-pass step for model tests: owns the arrays a StepBatch views.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "runtime/batch/step_batch.h"

namespace baton::testing {

struct StepBuilder {
  int block_size = 4;
  int max_blocks_per_seq = 4;
  std::vector<int32_t> token_ids, positions, slot_mapping, q_start{0}, context_lens, block_tables;
  int num_decode_seqs = 0;  // the first sequences added are the decode ones

  // Tokens [begin, end) of a sequence whose blocks are `blocks` (padded to max_blocks_per_seq).
  void Add(const std::vector<int32_t>& tokens, int begin, int end, std::vector<int32_t> blocks) {
    for (int pos = begin; pos < end; ++pos) {
      token_ids.push_back(tokens[pos]);
      positions.push_back(pos);
      slot_mapping.push_back(blocks[pos / block_size] * block_size + pos % block_size);
    }
    q_start.push_back(static_cast<int32_t>(token_ids.size()));
    context_lens.push_back(end);
    blocks.resize(max_blocks_per_seq, 0);
    block_tables.insert(block_tables.end(), blocks.begin(), blocks.end());
  }

  // A view: valid while this builder lives and is not changed.
  runtime::StepBatch Batch() const {
    return runtime::StepBatch{.token_ids = token_ids,
                              .positions = positions,
                              .slot_mapping = slot_mapping,
                              .q_start = q_start,
                              .context_lens = context_lens,
                              .block_tables = block_tables,
                              .num_decode_seqs = num_decode_seqs,
                              .max_blocks_per_seq = max_blocks_per_seq,
                              .return_logits = true};
  }
};

// Two steps (block size 4) that take every path of the forward pass: (1) sequence a's 10-token
// prompt and the first 6 tokens of b; (2) a decodes one token, b's second chunk over its cached
// prefix of 6, and c's whole 5-token prompt. 16 blocks suffice.
inline std::array<StepBuilder, 2> TwoMixedSteps() {
  const std::vector<int32_t> a = {5, 17, 3, 88, 42, 9, 60, 1, 2, 33, 71};
  const std::vector<int32_t> b = {7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  const std::vector<int32_t> c = {90, 4, 4, 4, 61};
  std::array<StepBuilder, 2> steps;
  steps[0].Add(a, 0, 10, {3, 7, 1});
  steps[0].Add(b, 0, 6, {5, 2});
  steps[1].num_decode_seqs = 1;
  steps[1].Add(a, 10, 11, {3, 7, 1});
  steps[1].Add(b, 6, 10, {5, 2, 9});
  steps[1].Add(c, 0, 5, {11, 0});
  return steps;
}

}  // namespace baton::testing
