// ModelRunner: turns a ScheduledStep into StepBatches, runs them on the instance's ranks, and
// advances the sequences' KV bookkeeping. Owns the index arrays of every step in flight (Submit
// starts one, Wait finishes the oldest: model_ranks.h, "Steps in flight"). Not thread-safe: engine
// thread only.
//
// Pipeline micro-batches: on an instance of pp > 1 stages the step is cut into micro-batches that
// the stages work on at once (model_ranks.h):
//   - decode-only steps: one micro-batch when the engine keeps a step in flight per stage (the
//     steps fill the pipeline: DistServe's one batch per stage); with fewer steps in flight,
//     ceil(pp / steps in flight) micro-batches of whole sequences, at the price of a bubble of
//     pp - 1 micro-batch times per step;
//   - steps with prompt tokens: 2 x pp micro-batches of about equal token counts, cutting a prompt
//     into chunks where needed (chunk k attends to the KV chunk k - 1 wrote on the same rank just
//     before), so even a lone prompt flows through the stages; chunks keep >= kMinChunkTokens
//     tokens so the matmuls stay efficient. Only a sequence's last chunk yields its logits.
// With one stage the step is one batch.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
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
// q_len 1, first), for num_stages pipeline stages and steps_in_flight steps at once (see the top
// of this file). Every token is in exactly one piece; pieces keep the step's order, so each
// micro-batch has its decode sequences first and a sequence's chunks come in order.
std::vector<std::vector<StepPiece>> PlanMicroBatches(std::span<const int> q_lens, int num_stages,
                                                     int steps_in_flight);

class ModelRunner {
 public:
  // steps_in_flight: the most the engine keeps on the ranks at once (>= 1).
  ModelRunner(ModelRanks* ranks, int steps_in_flight)
      : ranks_(ranks), steps_in_flight_(steps_in_flight) {}

  // Builds the step's micro-batches and starts them, after the step's swap copies, on the ranks;
  // returns at once (with one rank, once the step has run). Pre-condition: every sequence's block
  // table has room for its q_len new tokens; step and sampling ([step.seqs.size()], and what its
  // processing pointers view) stay alive until Wait; no sequence of the step is in another step in
  // flight.
  void Submit(const ScheduledStep& step, std::span<const TokenSampling> sampling, bool return_logits);
  // Waits for the oldest step in flight, which must be `step`. On success, out->token_ids[i] is
  // sequence i's next token drawn on the device as sampling[i] said (meaningful only for a sequence
  // whose prompt is now all computed), out->logits is [step.seqs.size(), vocab_size] when
  // return_logits, out->prompt_logprobs scores the prompt tokens the step's rows predict for the
  // sequences that ScoresPrompt() (seq: the index into step.seqs), and each sequence's
  // num_computed_tokens has advanced by its q_len. An error means the instance failed.
  absl::Status Wait(const ScheduledStep& step, StepOutput* out);

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

  // One submitted step: its plan and the arrays its micro-batches view.
  struct Flight {
    std::vector<std::vector<StepPiece>> plan;
    std::vector<MicroBatch> micro_batches;  // grown, reused
    std::vector<StepBatch> batches;
    uint64_t ticket = 0;
    bool return_logits = false;
  };

  ModelRanks* ranks_;
  int steps_in_flight_;
  std::deque<std::unique_ptr<Flight>> flights_;    // in submission order
  std::vector<std::unique_ptr<Flight>> spare_;     // done, kept for their buffers
  StepOutput piece_output_;  // a row per piece, when a prompt was cut into chunks
};

}  // namespace baton::runtime
