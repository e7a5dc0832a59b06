#include "runtime/engine/model_runner.h"

#include <algorithm>

#include "kernels/common/status_macros.h"

namespace baton::runtime {

absl::Status ModelRunner::Run(const ScheduledStep& step, std::vector<float>* logits) {
  token_ids_.clear();
  positions_.clear();
  slot_mapping_.clear();
  context_lens_.clear();
  q_start_.assign(1, 0);
  int max_blocks_per_seq = 1;
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    const Sequence& seq = *step.seqs[i];
    const int begin = seq.num_computed_tokens;
    const int end = begin + step.q_lens[i];
    for (int pos = begin; pos < end; ++pos) {
      token_ids_.push_back(seq.token_ids[pos]);
      positions_.push_back(pos);
      slot_mapping_.push_back(seq.block_table.SlotOf(pos));
    }
    q_start_.push_back(static_cast<int32_t>(token_ids_.size()));
    context_lens_.push_back(end);
    max_blocks_per_seq =
        std::max(max_blocks_per_seq, static_cast<int>(seq.block_table.blocks().size()));
  }
  block_tables_.assign(step.seqs.size() * max_blocks_per_seq, 0);
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    const auto& blocks = step.seqs[i]->block_table.blocks();
    std::copy(blocks.begin(), blocks.end(), block_tables_.begin() + i * max_blocks_per_seq);
  }
  const StepBatch batch{.token_ids = token_ids_,
                        .positions = positions_,
                        .slot_mapping = slot_mapping_,
                        .q_start = q_start_,
                        .context_lens = context_lens_,
                        .block_tables = block_tables_,
                        .num_decode_seqs = step.num_decode_seqs,
                        .max_blocks_per_seq = max_blocks_per_seq};
  RETURN_IF_ERROR(model_->Forward(batch, *kv_pool_, logits));
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    Sequence& seq = *step.seqs[i];
    seq.num_computed_tokens += step.q_lens[i];
    seq.block_table.AppendTokens(step.q_lens[i]);
  }
  return absl::OkStatus();
}

}  // namespace baton::runtime
