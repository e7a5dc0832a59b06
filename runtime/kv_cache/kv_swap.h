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

#include <cstddef>
#include <vector>

#include "runtime/kv_cache/block_allocator.h"

namespace baton::runtime {

// Blocks copied from one pool to another: block src[i] of the first to block dst[i] of the second.
// Copies are run in order, coalesced into runs of consecutive blocks (block_runs.h).
struct BlockCopies {
  std::vector<BlockId> src;
  std::vector<BlockId> dst;

  void Add(BlockId from, BlockId to) {
    src.push_back(from);
    dst.push_back(to);
  }
  size_t size() const { return src.size(); }
  bool empty() const { return src.empty(); }
};

}  // namespace baton::runtime
