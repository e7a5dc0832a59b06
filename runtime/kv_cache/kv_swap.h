// KV swap: moving a preempted sequence's KV blocks out of an instance's KV pool into a host swap
// pool and back, instead of dropping them and computing the sequence again (DistServe's and vLLM
// v0's swap space; vLLM v1 recomputes only).
//
// The step scheduler decides (step_scheduler.h): a decode that runs out of blocks swaps the victim
// out when the swap pool has room for all its blocks, and a swapped sequence comes back, before any
// waiting one is admitted, once the KV pool has room for its blocks and its next token. The copies
// travel with the step that decided them (ScheduledStep::swap_out / swap_in), and every rank runs
// them, over its own layers and heads, before the step's micro-batches (model_ranks.h): since each
// rank runs steps in submission order, a block is copied out before a later step reuses it, and
// copied in before the step that reads it.
#pragma once

#include <span>
#include <vector>

#include "runtime/kv_cache/block_allocator.h"

namespace baton::runtime {

// One block copied from block `src` of one pool to block `dst` of another.
struct BlockCopy {
  BlockId src = 0;
  BlockId dst = 0;
  bool operator==(const BlockCopy&) const = default;
};

// A run of consecutive blocks copied to consecutive blocks: one copy of num_blocks blocks.
struct BlockCopyRun {
  BlockId src = 0;
  BlockId dst = 0;
  int num_blocks = 1;
  bool operator==(const BlockCopyRun&) const = default;
};

// The copies merged into runs, in order: a copy extends the previous run when both its source and
// its destination follow the run's (pools lay blocks out one after another, kv_pool.h).
std::vector<BlockCopyRun> CoalesceBlockCopies(std::span<const BlockCopy> copies);

}  // namespace baton::runtime
