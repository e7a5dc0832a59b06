// StepScheduler: continuous batching inside one engine instance.
//
// Two policies:
//  - prefill-first (nano-vllm's, the default): each step is either a prefill step or a decode step. A
//    prefill step admits waiting sequences in FCFS order while the token budget and the free KV blocks
//    allow; if none can be admitted, every running sequence decodes one token.
//  - chunked prefill (vLLM's, for colocated instances): every step first decodes one token of each
//    running sequence, then spends the rest of the token budget on prefill chunks — unfinished
//    prompts first, then waiting ones in FCFS order — so long prompts never stall decoding.
// Either way, a decode that runs out of blocks preempts the most recently admitted sequence not in
// a step (its blocks are freed and it is recomputed later).
//
// Steps in flight: an instance of pp pipeline stages keeps up to max_steps_in_flight steps on its
// ranks at once (the engine, engine.h), so stage 0 starts the next step while the last stage
// finishes this one: no stage idles between steps (DistServe's and vLLM's pp batches in flight).
// Schedule plans a step from the sequences not already in one and marks its sequences in_step
// until StepDone; the running decodes are shared out, each step taking at most
// ceil(decoding / max_steps_in_flight) of them, so the steps in flight carry even parts of the
// batch rather than one step carrying it all while the others wait for its tokens.
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
  int max_steps_in_flight = 1;          // >= 1; an instance's pp size (see the top of this file)
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
  // Plans the next step from the sequences not in a step, allocates the KV blocks it needs and marks
  // its sequences in_step. Empty when nothing is ready (all in steps, or no free blocks).
  ScheduledStep Schedule();
  // The step's forward pass is done (its sequences' KV bookkeeping advanced): they may be
  // scheduled, preempted or removed again.
  void StepDone(const ScheduledStep& step);
  // Frees a sequence's blocks and forgets it (finished, cancelled, or released after hand-off).
  // Pre-condition: not in a step.
  void Remove(Sequence* seq);

  bool HasWork() const { return !waiting_.empty() || !running_.empty(); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  int num_running() const { return static_cast<int>(running_.size()); }

 private:
  ScheduledStep SchedulePrefillFirst();
  ScheduledStep ScheduleChunked();
  bool TryAdmit(Sequence* seq, int* token_budget);
  // Gives the running sequences that have finished their prompt and are not in a step (at most this
  // step's share of them) room for one more token, preempting from the back when blocks run out;
  // returns those sequences.
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
