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
// a step. With a swap pool (a second allocator, over the instance's host swap space) that has room
// for all the victim's blocks, the victim is swapped out: its blocks are copied to the swap pool
// and freed, and it waits, ahead of every sequence not yet admitted, until the KV pool has room for
// its blocks and its next token; then it is swapped back in and decodes in that very step. Without
// room (or without a swap pool) its blocks are freed and it is recomputed later. A step never both
// swaps out and swaps in, so its copies never read a block another of its copies writes
// (runtime/kv_cache/kv_swap.h has the rest of the contract).
//
// Steps in flight: an instance of pp pipeline stages keeps up to max_steps_in_flight steps on its
// ranks at once (the engine, engine.h), so stage 0 starts the next step while the last stage
// finishes this one: no stage idles between steps (DistServe's and vLLM's pp batches in flight).
// Schedule plans a step from the sequences not already in one and marks its sequences in_step
// until StepDone; the running decodes are shared out, each step taking at most
// ceil(decoding / max_steps_in_flight) of them, so the steps in flight carry even parts of the
// batch rather than one step carrying it all while the others wait for its tokens.
//
// Prefix caching (StepSchedulerConfig::prefix_caching): a sequence admitted from the queue first
// takes the longest run of its full blocks that the allocator's prefix cache holds (block_allocator.h)
// and computes only the rest; the block holding its last token is always computed, since its
// logits are needed. The full blocks a step computes are named in the cache when it is done
// (CacheComputedBlocks), so a block is found only once every rank has written it. A sequence that
// scores its prompt (prompt_logprobs) needs every prompt position's logits: it takes no cached
// blocks, though its own are cached for others.
// Not thread-safe: the engine thread owns it.
#pragma once

#include <deque>
#include <span>
#include <vector>

#include "runtime/batch/sequence.h"
#include "runtime/kv_cache/block_allocator.h"
#include "runtime/kv_cache/kv_swap.h"

namespace baton::runtime {

struct StepSchedulerConfig {
  int max_num_seqs = 64;                // sequences running at once
  int max_num_batched_tokens = 2048;    // new tokens per step; prefill-first: >= the longest prompt
  bool chunked_prefill = false;
  int max_steps_in_flight = 1;          // >= 1; an instance's pp size (see the top of this file)
  bool prefix_caching = false;
  BlockHash prefix_cache_root = 0;      // the chain's start (block_hash.h): the engine's salt
};

struct ScheduledStep {
  std::vector<Sequence*> seqs;  // decode sequences first (q_len 1), then prefill sequences
  std::vector<int> q_lens;      // [seqs.size()] new tokens fed this step (a prefill chunk may
                                // leave the prompt unfinished: nothing is sampled for it then)
  int num_decode_seqs = 0;
  // Run by every rank before the step's forward pass, swap_out first: KV pool -> swap pool, and
  // swap pool -> KV pool. A step may be nothing but copies (its decodes all preempted).
  BlockCopies swap_out;
  BlockCopies swap_in;
  bool empty() const { return seqs.empty() && swap_out.empty() && swap_in.empty(); }
};

class StepScheduler {
 public:
  // swap_allocator: the blocks of the instance's swap pool, or nullptr (preemption recomputes).
  StepScheduler(StepSchedulerConfig config, BlockAllocator* allocator,
                BlockAllocator* swap_allocator = nullptr)
      : config_(config), allocator_(allocator), swap_allocator_(swap_allocator) {}

  void Add(Sequence* seq);
  // Adds a sequence whose KV is already in its blocks straight to the running batch (decode role).
  void AddRunning(Sequence* seq);
  // Takes a running sequence out of the batch, keeping its blocks (prefill role hand-off).
  void Park(Sequence* seq);
  // Takes a running sequence out of the batch, keeping its blocks, until Resume puts it back at the
  // end of the batch (its consumer fell behind: Engine::Pause). Pre-condition: kRunning, not in a
  // step. A paused sequence gives its blocks up when others need them (ReleasePausedKv); it is then
  // computed again after Resume, as a preempted one is.
  void Pause(Sequence* seq);
  void Resume(Sequence* seq);  // Pre-condition: kPaused
  // Frees the blocks of paused sequences, longest paused first, until num_blocks are free or none
  // holds any.
  void ReleasePausedKv(int num_blocks);
  // Plans the next step from the sequences not in a step, allocates the KV blocks it needs and marks
  // its sequences in_step. Empty when nothing is ready (all in steps, or no free blocks).
  ScheduledStep Schedule();
  // The step's forward pass is done (its sequences' KV bookkeeping advanced): they may be
  // scheduled, preempted or removed again.
  void StepDone(const ScheduledStep& step);
  // With prefix caching, names the full blocks the step's sequences have computed in the cache.
  // Only for a step every rank has run well: a cached block is trusted by later sequences.
  void CacheComputedBlocks(const ScheduledStep& step);
  // Decode role: a sequence whose KV is computed elsewhere (Engine::AdmitPrefilled) takes, into its
  // empty block table, the cached run of the full blocks of its first num_kv_tokens tokens, counted
  // as an admission; the caller allocates the rest and receives only their KV. Returns the number
  // of blocks taken.
  int TakeCachedKv(Sequence* seq, int num_kv_tokens);
  // How many of the cached run of the full blocks of tokens[0, num_kv_tokens) TakeCachedKv would
  // take that a sequence holds already: those cost no free block (a cached block nobody holds
  // leaves the free count when taken, so it saves nothing). 0 without prefix caching.
  int NumHeldCachedBlocks(std::span<const int32_t> tokens, int num_kv_tokens,
                          int block_size) const;
  // Frees a sequence's blocks (in the swap pool when it is swapped out) and forgets it (finished,
  // cancelled, or released after hand-off). Pre-condition: not in a step.
  void Remove(Sequence* seq);

  bool HasWork() const { return !waiting_.empty() || !running_.empty() || !swapped_.empty(); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  int num_running() const { return static_cast<int>(running_.size()); }
  int num_swapped() const { return static_cast<int>(swapped_.size()); }
  // Preemptions so far, by what became of the victim's KV.
  int64_t num_swap_outs() const { return num_swap_outs_; }
  int64_t num_recomputes() const { return num_recomputes_; }
  // Prefix caching, in tokens, as vLLM counts them: those of the sequences admitted with caching
  // on, and those of them whose K/V came from the cache.
  int64_t num_prefix_cache_queries() const { return num_prefix_cache_queries_; }
  int64_t num_prefix_cache_hits() const { return num_prefix_cache_hits_; }

 private:
  ScheduledStep SchedulePrefillFirst();
  ScheduledStep ScheduleChunked();
  bool TryAdmit(Sequence* seq, int* token_budget);
  // A sequence leaving the queue with no blocks takes the cached run of its leading full blocks
  // (at most all but the block of its last token). UndoCachedPrefix gives them back when the
  // sequence is not admitted after all; CountAdmission counts the queries and hits when it is.
  void TakeCachedPrefix(Sequence* seq);
  void UndoCachedPrefix(Sequence* seq);
  // Takes the cached run of seq's first max_blocks full blocks into its empty block table.
  void TakeCachedBlocks(Sequence* seq, int max_blocks);
  void CountAdmission(Sequence& seq);
  // Gives the running sequences that have finished their prompt and are not in a step (at most this
  // step's share of them) room for one more token, preempting from the back when blocks run out;
  // returns those sequences. Then, if nothing was swapped out, swaps sequences in (SwapIn).
  std::vector<Sequence*> ReserveDecodes(ScheduledStep* step);
  // Brings swapped sequences back, oldest admission first, while the KV pool has room for each one's
  // blocks and its next token and the batch has room for the sequence; those that are decoding are
  // appended to *decodes with their next token's block.
  void SwapIn(ScheduledStep* step, std::vector<Sequence*>* decodes);
  // Allocates blocks for up to *token_budget tokens of seq's prompt; returns the chunk (0: none).
  int ReserveChunk(Sequence* seq, int* token_budget);
  // Swaps seq out (recording the copies in *step) when the swap pool has room, else frees its
  // blocks for a recompute.
  void Preempt(Sequence* seq, ScheduledStep* step);

  StepSchedulerConfig config_;
  BlockAllocator* allocator_;
  BlockAllocator* swap_allocator_;  // nullptr: no swap pool
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // admission order
  std::deque<Sequence*> swapped_;   // admission order
  std::vector<Sequence*> paused_;   // pause order
  int64_t num_swap_outs_ = 0;
  int64_t num_recomputes_ = 0;
  int64_t num_prefix_cache_queries_ = 0;
  int64_t num_prefix_cache_hits_ = 0;
};

}  // namespace baton::runtime
