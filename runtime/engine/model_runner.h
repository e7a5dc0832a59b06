// ModelRunner: turns a ScheduledStep into a StepBatch, runs the model, and advances the sequences'
// KV bookkeeping. Owns the step's index arrays. Not thread-safe: engine thread only.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "runtime/batch/step_batch.h"
#include "runtime/engine/step_scheduler.h"
#include "runtime/kv_cache/kv_pool.h"
#include "runtime/model/llama_model.h"

namespace baton::runtime {

class ModelRunner {
 public:
  ModelRunner(LlamaModel* model, const KvPool* kv_pool) : model_(model), kv_pool_(kv_pool) {}

  // Pre-condition: every sequence's block table has room for its q_len new tokens.
  // On success, (*logits) is [step.seqs.size(), vocab_size] and each sequence's
  // num_computed_tokens has advanced by its q_len.
  absl::Status Run(const ScheduledStep& step, std::vector<float>* logits);

 private:
  LlamaModel* model_;
  const KvPool* kv_pool_;
  std::vector<int32_t> token_ids_;
  std::vector<int32_t> positions_;
  std::vector<int32_t> slot_mapping_;
  std::vector<int32_t> q_start_;
  std::vector<int32_t> context_lens_;
  std::vector<int32_t> block_tables_;
};

}  // namespace baton::runtime
