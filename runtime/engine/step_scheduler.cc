#include "runtime/engine/step_scheduler.h"

#include <algorithm>

#include "kernels/common/check.h"

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

void StepScheduler::Pause(Sequence* seq) {
  BATON_CHECK(seq->status == SeqStatus::kRunning && !seq->in_step);
  std::erase(running_, seq);
  seq->status = SeqStatus::kPaused;
  paused_.push_back(seq);
}

void StepScheduler::Resume(Sequence* seq) {
  BATON_CHECK(seq->status == SeqStatus::kPaused);
  std::erase(paused_, seq);
  if (seq->block_table.blocks().empty()) {  // its KV went to others: computed again, first in line
    seq->status = SeqStatus::kWaiting;
    waiting_.push_front(seq);
    return;
  }
  AddRunning(seq);
}

void StepScheduler::ReleasePausedKv(int num_blocks) {
  for (Sequence* seq : paused_) {
    if (allocator_->CanAllocate(num_blocks)) return;
    if (seq->block_table.blocks().empty()) continue;
    allocator_->Release(seq->block_table.TakeBlocks());
    seq->num_computed_tokens = 0;
    ++num_recomputes_;
  }
}

bool StepScheduler::TryAdmit(Sequence* seq, int* token_budget) {
  TakeCachedPrefix(seq);
  const int q_len = seq->num_uncomputed_tokens();
  const int num_new_blocks = seq->block_table.NumBlocksToAppend(q_len);
  if (q_len <= *token_budget) ReleasePausedKv(num_new_blocks);
  if (q_len > *token_budget || !allocator_->CanAllocate(num_new_blocks)) {
    UndoCachedPrefix(seq);
    return false;
  }
  seq->block_table.AddBlocks(*allocator_->Allocate(num_new_blocks));
  *token_budget -= q_len;
  CountAdmission(*seq);
  return true;
}

void StepScheduler::TakeCachedPrefix(Sequence* seq) {
  if (!config_.prefix_caching || !seq->block_table.blocks().empty() || seq->ScoresPrompt()) return;
  TakeCachedBlocks(seq, (seq->num_tokens() - 1) / seq->block_table.block_size());
}

int StepScheduler::TakeCachedKv(Sequence* seq, int num_kv_tokens) {
  BATON_CHECK(seq->block_table.blocks().empty());
  if (!config_.prefix_caching) return 0;
  TakeCachedBlocks(seq, num_kv_tokens / seq->block_table.block_size());
  num_prefix_cache_queries_ += num_kv_tokens;
  num_prefix_cache_hits_ += seq->num_computed_tokens;
  return static_cast<int>(seq->block_table.blocks().size());
}

int StepScheduler::NumHeldCachedBlocks(std::span<const int32_t> tokens, int num_kv_tokens,
                                       int block_size) const {
  if (!config_.prefix_caching) return 0;
  std::vector<BlockHash> hashes;
  ExtendBlockHashes(config_.prefix_cache_root, tokens.first(num_kv_tokens / block_size * block_size),
                    block_size, &hashes);
  int held = 0;
  for (BlockId block : allocator_->FindCached(hashes)) held += allocator_->refcount(block) > 0;
  return held;
}

void StepScheduler::TakeCachedBlocks(Sequence* seq, int max_blocks) {
  const int block_size = seq->block_table.block_size();
  ExtendBlockHashes(config_.prefix_cache_root, seq->token_ids, block_size, &seq->block_hashes);
  const size_t num_blocks = std::min<size_t>(max_blocks, seq->block_hashes.size());
  const std::vector<BlockId> hit = allocator_->FindCached(std::span(seq->block_hashes).first(num_blocks));
  if (hit.empty()) return;
  for (BlockId block : hit) allocator_->IncRef(block);
  seq->block_table.AddBlocks(hit);
  seq->block_table.AppendTokens(static_cast<int>(hit.size()) * block_size);
  seq->block_table.set_num_cached_blocks(static_cast<int>(hit.size()));
  seq->num_computed_tokens = static_cast<int>(hit.size()) * block_size;
}

void StepScheduler::UndoCachedPrefix(Sequence* seq) {
  if (seq->num_computed_tokens == 0) return;
  allocator_->Release(seq->block_table.TakeBlocks());
  seq->num_computed_tokens = 0;
}

void StepScheduler::CountAdmission(Sequence& seq) {
  if (!config_.prefix_caching) return;
  seq.num_cached_tokens = seq.num_computed_tokens;  // admitted with nothing computed but its hit
  num_prefix_cache_queries_ += seq.num_tokens();
  num_prefix_cache_hits_ += seq.num_cached_tokens;
}

void StepScheduler::CacheComputedBlocks(const ScheduledStep& step) {
  if (!config_.prefix_caching) return;
  for (Sequence* seq : step.seqs) {
    BlockTable& table = seq->block_table;
    const int num_full = seq->num_computed_tokens / table.block_size();
    if (num_full <= table.num_cached_blocks()) continue;
    ExtendBlockHashes(config_.prefix_cache_root,
                      std::span(seq->token_ids).first(static_cast<size_t>(num_full) * table.block_size()),
                      table.block_size(), &seq->block_hashes);
    for (int b = table.num_cached_blocks(); b < num_full; ++b) {
      allocator_->Cache(table.blocks()[b], seq->block_hashes[b]);
    }
    table.set_num_cached_blocks(num_full);
  }
}

ScheduledStep StepScheduler::Schedule() {
  ScheduledStep step = config_.chunked_prefill ? ScheduleChunked() : SchedulePrefillFirst();
  for (Sequence* seq : step.seqs) seq->in_step = true;
  return step;
}

void StepScheduler::StepDone(const ScheduledStep& step) {
  for (Sequence* seq : step.seqs) seq->in_step = false;
}

ScheduledStep StepScheduler::SchedulePrefillFirst() {
  ScheduledStep step;
  int token_budget = config_.max_num_batched_tokens;
  // Swapped sequences come back before anything new is admitted.
  while (swapped_.empty() && !waiting_.empty() &&
         static_cast<int>(running_.size()) < config_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    if (!TryAdmit(seq, &token_budget)) break;
    waiting_.pop_front();
    seq->status = SeqStatus::kRunning;
    running_.push_back(seq);
    step.seqs.push_back(seq);
    step.q_lens.push_back(seq->num_uncomputed_tokens());
  }
  if (!step.empty()) return step;
  step.seqs = ReserveDecodes(&step);
  step.q_lens.assign(step.seqs.size(), 1);
  step.num_decode_seqs = static_cast<int>(step.seqs.size());
  return step;
}

std::vector<Sequence*> StepScheduler::ReserveDecodes(ScheduledStep* step) {
  auto decoding = [](const Sequence* seq) { return seq->num_uncomputed_tokens() == 1; };
  const int64_t num_decoding = std::count_if(running_.begin(), running_.end(), decoding);
  const size_t share = static_cast<size_t>(
      (num_decoding + config_.max_steps_in_flight - 1) / config_.max_steps_in_flight);
  std::vector<Sequence*> decodes;
  for (size_t i = 0; i < running_.size() && decodes.size() < share;) {
    Sequence* seq = running_[i];
    if (seq->in_step || !decoding(seq)) {  // in flight, or mid-prompt (chunked prefill)
      ++i;
      continue;
    }
    const int num_new_blocks = seq->block_table.NumBlocksToAppend(1);
    ReleasePausedKv(num_new_blocks);  // before a running sequence is preempted
    if (allocator_->CanAllocate(num_new_blocks)) {
      seq->block_table.AddBlocks(*allocator_->Allocate(num_new_blocks));
      decodes.push_back(seq);
      ++i;
      continue;
    }
    // The last sequence not in a step: at index i or after it, so none already reserved.
    const auto victim = std::find_if(running_.rbegin(), running_.rend(),
                                     [](const Sequence* s) { return !s->in_step; });
    Preempt(*victim, step);
    running_.erase(std::next(victim).base());
  }
  if (step->swap_out.empty()) SwapIn(step, &decodes);
  return decodes;
}

void StepScheduler::SwapIn(ScheduledStep* step, std::vector<Sequence*>* decodes) {
  while (!swapped_.empty() && static_cast<int>(running_.size()) < config_.max_num_seqs) {
    Sequence* seq = swapped_.front();
    const int num_blocks = static_cast<int>(seq->block_table.blocks().size());
    const bool decoding = seq->num_uncomputed_tokens() == 1;
    const int num_next = decoding ? seq->block_table.NumBlocksToAppend(1) : 0;
    if (!allocator_->CanAllocate(num_blocks + num_next)) return;
    swapped_.pop_front();
    const std::vector<BlockId> swap_blocks =
        seq->block_table.ReplaceBlocks(*allocator_->Allocate(num_blocks));
    for (int b = 0; b < num_blocks; ++b) {
      step->swap_in.Add(swap_blocks[b], seq->block_table.blocks()[b]);
    }
    // Free for later steps' swap-outs, which every rank runs after this step's swap-ins.
    swap_allocator_->Release(swap_blocks);
    seq->status = SeqStatus::kRunning;
    running_.push_back(seq);
    if (decoding) {
      seq->block_table.AddBlocks(*allocator_->Allocate(num_next));
      decodes->push_back(seq);
    }
  }
}

int StepScheduler::ReserveChunk(Sequence* seq, int* token_budget) {
  int chunk = std::min(seq->num_uncomputed_tokens(), *token_budget);
  // As many tokens as the free blocks hold.
  while (chunk > 0 && !allocator_->CanAllocate(seq->block_table.NumBlocksToAppend(chunk))) {
    const int room = (seq->block_table.NumBlocksToAppend(chunk) - allocator_->num_blocks_free()) *
                     seq->block_table.block_size();
    chunk = std::max(0, chunk - std::max(1, room));
  }
  if (chunk == 0) return 0;
  seq->block_table.AddBlocks(*allocator_->Allocate(seq->block_table.NumBlocksToAppend(chunk)));
  *token_budget -= chunk;
  return chunk;
}

ScheduledStep StepScheduler::ScheduleChunked() {
  ScheduledStep step;
  step.seqs = ReserveDecodes(&step);
  step.q_lens.assign(step.seqs.size(), 1);
  step.num_decode_seqs = static_cast<int>(step.seqs.size());
  int token_budget = config_.max_num_batched_tokens - step.num_decode_seqs;
  for (Sequence* seq : running_) {
    if (token_budget <= 0) break;
    if (seq->in_step || seq->num_uncomputed_tokens() <= 1) continue;
    if (const int chunk = ReserveChunk(seq, &token_budget); chunk > 0) {
      step.seqs.push_back(seq);
      step.q_lens.push_back(chunk);
    }
  }
  while (token_budget > 0 && swapped_.empty() && !waiting_.empty() &&
         static_cast<int>(running_.size()) < config_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    TakeCachedPrefix(seq);
    const int chunk = ReserveChunk(seq, &token_budget);
    if (chunk == 0) {
      UndoCachedPrefix(seq);
      break;
    }
    CountAdmission(*seq);
    waiting_.pop_front();
    seq->status = SeqStatus::kRunning;
    running_.push_back(seq);
    step.seqs.push_back(seq);
    step.q_lens.push_back(chunk);
  }
  return step;
}

void StepScheduler::Preempt(Sequence* seq, ScheduledStep* step) {
  const int num_blocks = static_cast<int>(seq->block_table.blocks().size());
  if (swap_allocator_ != nullptr && seq->num_computed_tokens > 0 &&
      swap_allocator_->CanAllocate(num_blocks)) {
    const std::vector<BlockId> blocks =
        seq->block_table.ReplaceBlocks(*swap_allocator_->Allocate(num_blocks));
    for (int b = 0; b < num_blocks; ++b) {
      step->swap_out.Add(blocks[b], seq->block_table.blocks()[b]);
    }
    // Free for this step's sequences: every rank copies them out before the step writes them.
    allocator_->Release(blocks);
    seq->status = SeqStatus::kSwapped;
    swapped_.push_front(seq);  // victims go from the back of running_: swapped_ keeps its order
    ++num_swap_outs_;
    return;
  }
  ++num_recomputes_;
  allocator_->Release(seq->block_table.TakeBlocks());
  seq->num_computed_tokens = 0;
  seq->status = SeqStatus::kWaiting;
  waiting_.push_front(seq);
}

void StepScheduler::Remove(Sequence* seq) {
  BATON_CHECK(!seq->in_step);  // its step still writes its blocks
  BlockAllocator* pool = seq->status == SeqStatus::kSwapped ? swap_allocator_ : allocator_;
  pool->Release(seq->block_table.TakeBlocks());
  std::erase(running_, seq);
  std::erase(waiting_, seq);
  std::erase(swapped_, seq);
  std::erase(paused_, seq);
}

}  // namespace baton::runtime
