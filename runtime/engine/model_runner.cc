#include "runtime/engine/model_runner.h"

#include <algorithm>
#include <cstdint>

#include "kernels/common/status_macros.h"

namespace baton::runtime {

std::vector<int> SplitMicroBatches(const std::vector<int>& q_lens, int max_parts) {
  std::vector<int> ends;
  const int n = static_cast<int>(q_lens.size());
  const int parts = std::min(std::max(max_parts, 1), n);
  int64_t total = 0;
  for (int q : q_lens) total += q;
  int64_t prefix = 0;
  for (int i = 0; i < n; ++i) {
    prefix += q_lens[i];
    const int parts_done = static_cast<int>(ends.size());
    const int left_after = n - (i + 1);
    const int parts_left_after = parts - (parts_done + 1);
    // Close the part once it reaches its share of the tokens, or when every remaining sequence must
    // start a part of its own; never close the last part early.
    const bool reached_share = prefix * parts >= total * (parts_done + 1);
    if (parts_left_after > 0 && (reached_share || left_after == parts_left_after)) {
      ends.push_back(i + 1);
    }
  }
  if (n > 0) ends.push_back(n);
  return ends;
}

void ModelRunner::Build(const ScheduledStep& step, int begin, int end, MicroBatch& mb) {
  mb.token_ids.clear();
  mb.positions.clear();
  mb.slot_mapping.clear();
  mb.context_lens.clear();
  mb.q_start.assign(1, 0);
  int max_blocks_per_seq = 1;
  int num_decode_seqs = 0;
  for (int i = begin; i < end; ++i) {
    const Sequence& seq = *step.seqs[i];
    const int first = seq.num_computed_tokens;
    const int last = first + step.q_lens[i];
    for (int pos = first; pos < last; ++pos) {
      mb.token_ids.push_back(seq.token_ids[pos]);
      mb.positions.push_back(pos);
      mb.slot_mapping.push_back(seq.block_table.SlotOf(pos));
    }
    mb.q_start.push_back(static_cast<int32_t>(mb.token_ids.size()));
    mb.context_lens.push_back(last);
    max_blocks_per_seq =
        std::max(max_blocks_per_seq, static_cast<int>(seq.block_table.blocks().size()));
    if (i < step.num_decode_seqs) ++num_decode_seqs;
  }
  mb.block_tables.assign(static_cast<size_t>(end - begin) * max_blocks_per_seq, 0);
  for (int i = begin; i < end; ++i) {
    const auto& blocks = step.seqs[i]->block_table.blocks();
    std::copy(blocks.begin(), blocks.end(),
              mb.block_tables.begin() + static_cast<size_t>(i - begin) * max_blocks_per_seq);
  }
  mb.batch = StepBatch{.token_ids = mb.token_ids,
                       .positions = mb.positions,
                       .slot_mapping = mb.slot_mapping,
                       .q_start = mb.q_start,
                       .context_lens = mb.context_lens,
                       .block_tables = mb.block_tables,
                       .num_decode_seqs = num_decode_seqs,
                       .max_blocks_per_seq = max_blocks_per_seq};
}

absl::Status ModelRunner::Run(const ScheduledStep& step, std::vector<float>* logits) {
  const std::vector<int> ends = SplitMicroBatches(step.q_lens, ranks_->layout().pp_size);
  if (micro_batches_.size() < ends.size()) micro_batches_.resize(ends.size());
  batches_.clear();
  int begin = 0;
  for (size_t m = 0; m < ends.size(); ++m) {
    Build(step, begin, ends[m], micro_batches_[m]);
    batches_.push_back(micro_batches_[m].batch);
    begin = ends[m];
  }
  RETURN_IF_ERROR(ranks_->Forward(batches_, logits));
  for (size_t i = 0; i < step.seqs.size(); ++i) {
    Sequence& seq = *step.seqs[i];
    seq.num_computed_tokens += step.q_lens[i];
    seq.block_table.AppendTokens(step.q_lens[i]);
  }
  return absl::OkStatus();
}

}  // namespace baton::runtime
