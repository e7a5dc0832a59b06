#include "runtime/engine/step_scheduler.h"

#include <algorithm>

#include "runtime/common/check.h"

namespace baton::runtime {

void StepScheduler::Add(Sequence* seq) {
  seq->status = SeqStatus::kWaiting;
  waiting_.push_back(seq);
}

void StepScheduler::AddRunning(Sequence* seq) {
  seq->status = SeqStatus::kRunning;
  running_.push_back(seq);
}

void StepScheduler::Park(Sequence* seq) {
  std::erase(running_, seq);
  seq->status = SeqStatus::kHoldingKv;
}

bool StepScheduler::TryAdmit(Sequence* seq, int* token_budget) {
  const int q_len = seq->num_uncomputed_tokens();
  if (q_len > *token_budget) return false;
  const int num_new_blocks = seq->block_table.NumBlocksToAppend(q_len);
  if (!allocator_->CanAllocate(num_new_blocks)) return false;
  seq->block_table.AddBlocks(*allocator_->Allocate(num_new_blocks));
  *token_budget -= q_len;
  return true;
}

ScheduledStep StepScheduler::Schedule() {
  ScheduledStep step;
  int token_budget = config_.max_num_batched_tokens;
  while (!waiting_.empty() && static_cast<int>(running_.size()) < config_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    if (!TryAdmit(seq, &token_budget)) break;
    waiting_.pop_front();
    seq->status = SeqStatus::kRunning;
    running_.push_back(seq);
    step.seqs.push_back(seq);
    step.q_lens.push_back(seq->num_uncomputed_tokens());
  }
  if (!step.empty()) return step;

  // Decode: every running sequence needs room for one more token; preempt from the back if not.
  for (size_t i = 0; i < running_.size();) {
    Sequence* seq = running_[i];
    const int num_new_blocks = seq->block_table.NumBlocksToAppend(1);
    if (allocator_->CanAllocate(num_new_blocks)) {
      seq->block_table.AddBlocks(*allocator_->Allocate(num_new_blocks));
      ++i;
      continue;
    }
    Preempt(running_.back());
    running_.pop_back();
  }
  for (Sequence* seq : running_) {
    step.seqs.push_back(seq);
    step.q_lens.push_back(1);
  }
  step.num_decode_seqs = static_cast<int>(step.seqs.size());
  return step;
}

void StepScheduler::Preempt(Sequence* seq) {
  allocator_->Release(seq->block_table.TakeBlocks());
  seq->num_computed_tokens = 0;
  seq->status = SeqStatus::kWaiting;
  waiting_.push_front(seq);
}

void StepScheduler::Remove(Sequence* seq) {
  allocator_->Release(seq->block_table.TakeBlocks());
  std::erase(running_, seq);
  std::erase(waiting_, seq);
}

}  // namespace baton::runtime
