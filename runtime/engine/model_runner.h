// ModelRunner: turns a ScheduledStep into StepBatches, runs them on the instance's ranks, and
// advances the sequences' KV bookkeeping. Owns the steps' index arrays. Not thread-safe: engine
// thread only.
//
// Pipeline micro-batches: on an instance of pp > 1 stages the step is cut into micro-batches that
// the stages work on at once (model_ranks.h), with a bubble of pp - 1 micro-batch times per step:
//   - decode-only steps: pp micro-batches of whole sequences (DistServe's one per stage);
//   - steps with prompt tokens: 2 x pp micro-batches of about equal token counts, cutting a prompt
//     into chunks where needed (chunk k attends to the KV chunk k - 1 wrote on the same rank just
//     before), so even a lone prompt flows through the stages; chunks keep >= kMinChunkTokens
//     tokens so the matmuls stay efficient. Only a sequence's last chunk yields its logits.
// With one stage the step is one batch.
#pragma once

#include <span>
#include <vector>

#include "absl/status/status.h"
#include "runtime/batch/step_batch.h"
#include "runtime/engine/model_ranks.h"
#include "runtime/engine/step_scheduler.h"

namespace baton::runtime {

// Part of one sequence's new tokens in a micro-batch: [q_begin, q_begin + q_len) of its q_len.
struct StepPiece {
  int seq = 0;      // index into the step's sequences
  int q_begin = 0;  // offset into the sequence's new tokens this step
  int q_len = 0;
  bool operator==(const StepPiece&) const = default;
};

inline constexpr int kMinChunkTokens = 16;

// The micro-batches of a step whose sequences feed q_lens new tokens each (decode sequences, of
// q_len 1, first), for num_stages pipeline stages (see the top of this file). Every token is in
// exactly one piece; pieces keep the step's order, so each micro-batch has its decode sequences
// first and a sequence's chunks come in order.
std::vector<std::vector<StepPiece>> PlanMicroBatches(std::span<const int> q_lens, int num_stages);

class ModelRunner {
 public:
  explicit ModelRunner(ModelRanks* ranks) : ranks_(ranks) {}

  // Pre-condition: every sequence's block table has room for its q_len new tokens; sampling is
  // [step.seqs.size()]. On success, out->token_ids[i] is sequence i's next token drawn on the
  // device as sampling[i] says (meaningful only for a sequence whose prompt is now all computed),
  // out->logits is [step.seqs.size(), vocab_size] when return_logits, out->prompt_logprobs scores
  // the prompt tokens the step's rows predict for the sequences that ScoresPrompt() (seq: the index
  // into step.seqs), and each sequence's num_computed_tokens has advanced by its q_len.
  absl::Status Run(const ScheduledStep& step, std::span<const TokenSampling> sampling,
                   bool return_logits, StepOutput* out);

 private:
  // The index arrays of one micro-batch; batch views them.
  struct MicroBatch {
    std::vector<int32_t> token_ids;
    std::vector<int32_t> positions;
    std::vector<int32_t> slot_mapping;
    std::vector<int32_t> q_start;
    std::vector<int32_t> context_lens;
    std::vector<int32_t> block_tables;
    std::vector<TokenSampling> sampling;
    std::vector<int32_t> prompt_targets;
    std::vector<int32_t> prompt_top_k;
    StepBatch batch;
  };
  static void Build(const ScheduledStep& step, std::span<const StepPiece> pieces,
                    std::span<const TokenSampling> sampling, bool return_logits, MicroBatch& mb);

  ModelRanks* ranks_;
  std::vector<MicroBatch> micro_batches_;  // grown, reused
  std::vector<StepBatch> batches_;
  StepOutput piece_output_;  // a row per piece, when a prompt was cut into chunks
};

}  // namespace baton::runtime
