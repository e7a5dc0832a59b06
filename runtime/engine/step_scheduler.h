// StepScheduler: continuous batching inside one engine instance.
//
// Two policies:
//  - prefill-first (nano-vllm's, the default): each step is either a prefill step or a decode step. A
//    prefill step admits waiting sequences in FCFS order while the token budget and the free KV blocks
//    allow; if none can be admitted, every running sequence decodes one token.
//  - chunked prefill (vLLM's, for colocated instances): every step first decodes one token of each
//    running sequence, then spends the rest of the token budget on prefill chunks — unfinished
//    prompts first, then waiting ones in FCFS order — so long prompts never stall decoding.
// Either way, a decode that runs out of blocks preempts the most recently admitted sequence (its
// blocks are freed and it is recomputed later).
// Not thread-safe: the engine thread owns it.
#pragma once

#include <deque>
#include <vector>

#include "runtime/batch/sequence.h"
#include "runtime/kv_cache/block_allocator.h"

namespace baton::runtime {

struct StepSchedulerConfig {
  int max_num_seqs = 64;                // sequences running at once
  int max_num_batched_tokens = 2048;    // new tokens per step; prefill-first: >= the longest prompt
  bool chunked_prefill = false;
};

struct ScheduledStep {
  std::vector<Sequence*> seqs;  // decode sequences first (q_len 1), then prefill sequences
  std::vector<int> q_lens;      // [seqs.size()] new tokens fed this step (a prefill chunk may
                                // leave the prompt unfinished: nothing is sampled for it then)
  int num_decode_seqs = 0;
  bool empty() const { return seqs.empty(); }
};

class StepScheduler {
 public:
  StepScheduler(StepSchedulerConfig config, BlockAllocator* allocator)
      : config_(config), allocator_(allocator) {}

  void Add(Sequence* seq);
  // Adds a sequence whose KV is already in its blocks straight to the running batch (decode role).
  void AddRunning(Sequence* seq);
  // Takes a running sequence out of the batch, keeping its blocks (prefill role hand-off).
  void Park(Sequence* seq);
  // Plans the next step and allocates the KV blocks it needs.
  ScheduledStep Schedule();
  // Frees a sequence's blocks and forgets it (finished, cancelled, or released after hand-off).
  void Remove(Sequence* seq);

  bool HasWork() const { return !waiting_.empty() || !running_.empty(); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  int num_running() const { return static_cast<int>(running_.size()); }

 private:
  ScheduledStep SchedulePrefillFirst();
  ScheduledStep ScheduleChunked();
  bool TryAdmit(Sequence* seq, int* token_budget);
  // Gives every running sequence that has finished its prompt room for one more token, preempting
  // from the back when blocks run out; returns those sequences.
  std::vector<Sequence*> ReserveDecodes();
  // Allocates blocks for up to *token_budget tokens of seq's prompt; returns the chunk (0: none).
  int ReserveChunk(Sequence* seq, int* token_budget);
  void Preempt(Sequence* seq);

  StepSchedulerConfig config_;
  BlockAllocator* allocator_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // admission order
};

}  // namespace baton::runtime
