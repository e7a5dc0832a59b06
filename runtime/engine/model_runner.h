// ModelRunner: turns a ScheduledStep into StepBatches, runs them on the instance's ranks, and
// advances the sequences' KV bookkeeping. Owns the steps' index arrays. Not thread-safe: engine
// thread only.
//
// Pipeline micro-batches: on an instance with pp stages, the step's sequences are cut into up to
// pp contiguous micro-batches of about equal token counts (decode sequences stay before prefill
// ones inside each), so the stages work on different micro-batches at once (model_ranks.h). A
// sequence is never split, so a step of one prompt is one micro-batch. With one stage, the step is
// one batch.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "runtime/batch/step_batch.h"
#include "runtime/engine/model_ranks.h"
#include "runtime/engine/step_scheduler.h"

namespace baton::runtime {

class ModelRunner {
 public:
  explicit ModelRunner(ModelRanks* ranks) : ranks_(ranks) {}

  // Pre-condition: every sequence's block table has room for its q_len new tokens.
  // On success, (*logits) is [step.seqs.size(), vocab_size] and each sequence's
  // num_computed_tokens has advanced by its q_len.
  absl::Status Run(const ScheduledStep& step, std::vector<float>* logits);

 private:
  // The index arrays of one micro-batch; batch views them.
  struct MicroBatch {
    std::vector<int32_t> token_ids;
    std::vector<int32_t> positions;
    std::vector<int32_t> slot_mapping;
    std::vector<int32_t> q_start;
    std::vector<int32_t> context_lens;
    std::vector<int32_t> block_tables;
    StepBatch batch;
  };
  // Fills micro-batch `mb` from step.seqs[begin, end).
  static void Build(const ScheduledStep& step, int begin, int end, MicroBatch& mb);

  ModelRanks* ranks_;
  std::vector<MicroBatch> micro_batches_;  // grown, reused
  std::vector<StepBatch> batches_;
};

// Cuts [0, q_lens.size()) into at most max_parts contiguous non-empty ranges of about equal sums
// of q_lens; returns the range ends (the last is q_lens.size()). Empty for empty q_lens.
std::vector<int> SplitMicroBatches(const std::vector<int>& q_lens, int max_parts);

}  // namespace baton::runtime
