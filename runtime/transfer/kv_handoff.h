// KvHandoff: what a prefill instance hands a decode instance so that every decode rank can pull its
// part of a request's KV, whatever the two instances' tp x pp layouts (kv_transport.h, lifecycle).
//
// The prefill worker describes the request once, in the model's terms: the whole model's KV shape,
// its own ParallelLayout, how to reach each of its ranks' pools (KvSource, stage-major), and the
// block ids, which are the same on every rank (one allocator per instance, model_ranks.h). The
// scheduler carries it unchanged. The decode worker plans its own pulls from it (PlanKvPulls), so
// neither the prefill side nor the scheduler needs to know the decode layout:
//   - same KV partition (equal rank count and every rank holding the same layers and KV heads, e.g.
//     equal layouts): decode rank d pulls whole blocks from prefill rank d — a same-layout
//     KvPullSpec, which every transport serves (TCP included);
//   - otherwise: decode rank d gets a re-slicing KvPullSpec, spec.slabs = MapKvSlabs(...)[d] and
//     spec.rank_sources naming each prefill rank those slabs read (kv_slab_mapping.h).
//
// Pure functions, no I/O.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/kv_cache/block_allocator.h"
#include "runtime/kv_cache/kv_pool.h"
#include "runtime/model/model_shard.h"
#include "runtime/transfer/kv_transport.h"

namespace baton::runtime {

struct KvHandoff {
  KvPoolShape model_shape;            // the whole model: all layers, all KV heads, head_dim, block_size
  ParallelLayout layout;              // the prefill instance's
  std::vector<KvSource> rank_sources; // [layout.num_ranks()] each prefill rank's pool, stage-major
  std::vector<BlockId> blocks;        // [ceil(num_tokens / block_size)] token order, same on every rank
  int num_tokens = 0;                 // tokens of KV the blocks hold (the last block may be partial)
  // The capability to read `blocks` from the ranks' KV servers (kv_grants.h): every pull presents
  // it. Empty when the prefill side grants nothing.
  std::string kv_grant;
  // The element type a hand-off from another process named (v1::KvSource::kv_dtype) when this build
  // does not know it; model_shape.dtype is meaningless then. Kept so that the scheduler carries it
  // unchanged and the decode worker refuses it, naming it (ValidateKvHandoff). "" otherwise.
  std::string unknown_kv_dtype;
  bool operator==(const KvHandoff&) const = default;
};

// What the hand-off alone can tell: InvalidArgument, naming the numbers, if it names an unknown KV
// element type (unknown_kv_dtype), the layout does not fit model_shape (MakeKvRankShard),
// rank_sources does not have one entry per prefill rank, num_tokens < 0, blocks.size() !=
// ceil(num_tokens / block_size), a block id is negative, or kv_grant is neither empty nor
// KvGrants::kTokenBytes long.
absl::Status ValidateKvHandoff(const KvHandoff& handoff);

// The pull of every decode rank (index = decode rank_idx, stage-major) of an instance that runs
// `decode_model_shape` (its whole model's KV shape; block_size its own) as `decode_layout`. Same
// partition: same-layout specs; otherwise re-slicing specs whose rank_sources hold the prefill
// ranks' sources, pool shapes and (shared) block ids, filled only for the ranks the decode rank's
// slabs name (the others are left empty; kv_transport.h allows it). InvalidArgument as
// ValidateKvHandoff, and when the two models' KV shapes differ (num_layers, num_kv_heads, head_dim,
// block_size or dtype: the instances run different models, block sizes or KV cache element types)
// or decode_layout does not fit the model.
absl::StatusOr<std::vector<KvPullSpec>> PlanKvPulls(const KvHandoff& handoff,
                                                    const KvPoolShape& decode_model_shape,
                                                    const ParallelLayout& decode_layout);

// The hand-off of the blocks after the first num_blocks (full ones), for a decode instance whose
// prefix cache holds those already: it pulls the rest. Pre-condition: num_blocks * block_size <=
// num_tokens.
KvHandoff DropLeadingBlocks(KvHandoff handoff, int num_blocks);

}  // namespace baton::runtime
