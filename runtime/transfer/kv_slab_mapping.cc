#include "runtime/transfer/kv_slab_mapping.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "runtime/model/model_shard.h"

namespace baton::runtime {
namespace {

absl::Status Prefixed(const char* prefix, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

}  // namespace

absl::StatusOr<KvRankShard> MakeKvRankShard(const KvPoolShape& model_shape, const ParallelLayout& layout,
                                            int rank_idx) {
  if (model_shape.num_layers < 1 || model_shape.num_kv_heads < 1 || model_shape.head_dim < 1 ||
      model_shape.block_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kv slabs: model shape (layers ", model_shape.num_layers, ", kv heads ",
        model_shape.num_kv_heads, ", head_dim ", model_shape.head_dim, ", block_size ",
        model_shape.block_size, ") has a size below 1"));
  }
  ASSIGN_OR_RETURN(const ShardSpec spec, ShardSpecOfRank(layout, rank_idx));
  ASSIGN_OR_RETURN(const IndexRange layers,
                   StageLayerRange(model_shape.num_layers, layout.pp_size, spec.pp_rank,
                                   layout.stage_num_layers));
  ASSIGN_OR_RETURN(const IndexRange kv_heads,
                   TpKvHeadRange(model_shape.num_kv_heads, layout.tp_size, spec.tp_rank));
  KvRankShard rank;
  rank.layer_begin = layers.begin;
  rank.layer_end = layers.end;
  rank.kv_head_begin = kv_heads.begin;
  rank.kv_head_end = kv_heads.end;
  rank.pool_shape = model_shape;
  rank.pool_shape.num_layers = layers.size();
  rank.pool_shape.num_kv_heads = kv_heads.size();
  return rank;
}

absl::StatusOr<std::vector<std::vector<KvSlab>>> MapKvSlabs(const KvPoolShape& model_shape,
                                                            const ParallelLayout& prefill,
                                                            const ParallelLayout& decode) {
  // max(..., 1): a layout with a size below 1 still reaches MakeKvRankShard, which names it.
  std::vector<KvRankShard> src_ranks;
  for (int rank_idx = 0; rank_idx < std::max(prefill.num_ranks(), 1); ++rank_idx) {
    absl::StatusOr<KvRankShard> rank = MakeKvRankShard(model_shape, prefill, rank_idx);
    if (!rank.ok()) return Prefixed("prefill layout: ", rank.status());
    src_ranks.push_back(*std::move(rank));
  }
  // Prefill rank j of the holders of a replicated head serves decode ranks d with d % r == j.
  const int num_src_replicas = KvHeadReplicas(model_shape.num_kv_heads, prefill.tp_size);
  std::vector<std::vector<KvSlab>> slabs_per_dst;
  for (int dst_idx = 0; dst_idx < std::max(decode.num_ranks(), 1); ++dst_idx) {
    absl::StatusOr<KvRankShard> dst = MakeKvRankShard(model_shape, decode, dst_idx);
    if (!dst.ok()) return Prefixed("decode layout: ", dst.status());
    std::vector<KvSlab> slabs;
    // Stage-major order of the sources gives slabs sorted by (layer_begin, kv_head_begin): stages
    // hold increasing layers, and within a stage tp ranks hold non-decreasing heads.
    for (int src_idx = 0; src_idx < static_cast<int>(src_ranks.size()); ++src_idx) {
      const KvRankShard& src = src_ranks[src_idx];
      const int src_tp_rank = src_idx % prefill.tp_size;
      if (src_tp_rank % num_src_replicas != dst_idx % num_src_replicas) continue;
      const int layer_begin = std::max(src.layer_begin, dst->layer_begin);
      const int layer_end = std::min(src.layer_end, dst->layer_end);
      const int kv_head_begin = std::max(src.kv_head_begin, dst->kv_head_begin);
      const int kv_head_end = std::min(src.kv_head_end, dst->kv_head_end);
      if (layer_begin >= layer_end || kv_head_begin >= kv_head_end) continue;
      slabs.push_back(KvSlab{.src_rank_idx = src_idx,
                             .layer_begin = layer_begin,
                             .layer_end = layer_end,
                             .kv_head_begin = kv_head_begin,
                             .kv_head_end = kv_head_end,
                             .src_layer_idx = layer_begin - src.layer_begin,
                             .src_kv_head_idx = kv_head_begin - src.kv_head_begin,
                             .dst_layer_idx = layer_begin - dst->layer_begin,
                             .dst_kv_head_idx = kv_head_begin - dst->kv_head_begin});
    }
    slabs_per_dst.push_back(std::move(slabs));
  }
  return slabs_per_dst;
}

namespace {

KvBytes BytesOf(int64_t num_layer_heads, const KvPoolShape& shape) {
  KvBytes bytes;
  bytes.per_token_bytes =
      num_layer_heads * shape.head_dim * 2 * static_cast<int64_t>(DTypeBytes(shape.dtype));
  bytes.per_block_bytes = bytes.per_token_bytes * shape.block_size;
  return bytes;
}

}  // namespace

KvBytes OwnedKvBytes(const KvRankShard& rank) {
  return BytesOf(static_cast<int64_t>(rank.pool_shape.num_layers) * rank.pool_shape.num_kv_heads,
                 rank.pool_shape);
}

KvBytes SlabKvBytes(std::span<const KvSlab> slabs, const KvPoolShape& model_shape) {
  int64_t num_layer_heads = 0;
  for (const KvSlab& slab : slabs) {
    num_layer_heads += static_cast<int64_t>(slab.num_layers()) * slab.num_kv_heads();
  }
  return BytesOf(num_layer_heads, model_shape);
}

}  // namespace baton::runtime
