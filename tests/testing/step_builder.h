// A hand-built forward-pass step for model tests: owns the arrays a StepBatch views.
#pragma once

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

}  // namespace baton::testing
