// KV slab mapping: which (layer range x KV head range) slabs each rank of a decode instance must
// pull from which ranks of a prefill instance, when the two instances shard the model differently
// (DistServe's intersection arithmetic).
//
// Each rank's KV pool holds its KV heads of its layers (runtime/model/model_shard.h: layers by
// pipeline stage, KV heads by tensor-parallel rank, replicated when tp_size > num_kv_heads). Ranks
// are numbered stage-major, rank_idx = pp_rank * tp_size + tp_rank. For decode rank d, the slabs
// are the non-empty intersections of d's (layers x KV heads) with each prefill rank's: at most one
// slab per (decode rank, prefill rank), each as large as the two layouts allow.
//   - KV heads replicated on the prefill side (tp_p > num_kv_heads): each head is read from exactly
//     one holder. Head h is held by prefill tp ranks h * r + j, j in [0, r),
//     r = tp_p / num_kv_heads; decode rank d reads it from j = d % r. Deterministic, and it
//     spreads the reads: decode ranks that need the same heads (decode replication, or several
//     decode stages over one prefill stage) read different replicas instead of all loading the
//     lowest tp rank.
//   - KV heads replicated on the decode side (tp_d > num_kv_heads): every decode rank that holds a
//     head pulls it (each keeps its own copy).
//
// In bytes (KvPool layout [num_blocks][num_layers][2][num_kv_heads][block_size][head_dim]), one
// slab of one block is num_layers x 2 contiguous ranges of num_kv_heads * block_size * head_dim
// elements on each side; consecutive blocks then coalesce as kv_cache/block_runs.h does.
//
// Pure functions, no I/O. A decode rank's slabs go into a re-slicing KvPullSpec (kv_transport.h,
// "Shapes"); kv_slab_copy.h turns each into byte ranges, ShmTransport copies them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/kv_cache/kv_pool.h"
#include "runtime/model/model_shard.h"

namespace baton::runtime {

// One piece a decode rank pulls: layers [layer_begin, layer_end) x KV heads
// [kv_head_begin, kv_head_end), global indices, of every block of the request.
struct KvSlab {
  int src_rank_idx = 0;  // prefill rank holding it, stage-major
  int layer_begin = 0;
  int layer_end = 0;
  int kv_head_begin = 0;
  int kv_head_end = 0;
  int src_layer_idx = 0;    // layer_begin as a local layer of the source rank's pool
  int src_kv_head_idx = 0;  // kv_head_begin as a local KV head of the source rank's pool
  int dst_layer_idx = 0;    // layer_begin as a local layer of the destination rank's pool
  int dst_kv_head_idx = 0;  // kv_head_begin as a local KV head of the destination rank's pool

  int num_layers() const { return layer_end - layer_begin; }
  int num_kv_heads() const { return kv_head_end - kv_head_begin; }
  bool operator==(const KvSlab&) const = default;
};

// The global layers and KV heads of rank rank_idx of `layout`, and its pool's shape.
struct KvRankShard {
  int layer_begin = 0;
  int layer_end = 0;
  int kv_head_begin = 0;
  int kv_head_end = 0;
  KvPoolShape pool_shape;  // num_layers, num_kv_heads of this rank; the rest as the model's
};

// `model_shape` is the whole model's KV shape (all layers, all KV heads). InvalidArgument, naming
// the numbers, if a model dimension is < 1, rank_idx is outside [0, layout.num_ranks()), tp_size
// neither divides nor is a multiple of num_kv_heads, there are more stages than layers, or the
// layer split is invalid.
absl::StatusOr<KvRankShard> MakeKvRankShard(const KvPoolShape& model_shape, const ParallelLayout& layout,
                                            int rank_idx);

// For every decode rank (index = decode rank_idx), its slabs in order of (layer_begin,
// kv_head_begin). Every (layer, KV head) the decode rank holds is covered by exactly one slab, and
// every slab lies inside its source rank's layers and heads. InvalidArgument (as MakeKvRankShard,
// prefixed "prefill layout: " or "decode layout: ") if either layout does not fit the model.
absl::StatusOr<std::vector<std::vector<KvSlab>>> MapKvSlabs(const KvPoolShape& model_shape,
                                                            const ParallelLayout& prefill,
                                                            const ParallelLayout& decode);

struct KvBytes {
  int64_t per_token_bytes = 0;  // sum of num_layers * num_kv_heads * head_dim * 2 * DTypeBytes
  int64_t per_block_bytes = 0;  // per_token_bytes * block_size
  bool operator==(const KvBytes&) const = default;
};

// The KV bytes a rank's pool holds per token and per block, in elements of its pool's dtype.
KvBytes OwnedKvBytes(const KvRankShard& rank);

// The KV bytes a list of slabs moves per token and per block of the request, in elements of
// model_shape.dtype. For the slabs of a decode rank from MapKvSlabs this equals OwnedKvBytes of
// that rank.
KvBytes SlabKvBytes(std::span<const KvSlab> slabs, const KvPoolShape& model_shape);

}  // namespace baton::runtime
