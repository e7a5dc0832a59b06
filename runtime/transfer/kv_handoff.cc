#include "runtime/transfer/kv_handoff.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/common/check.h"
#include "kernels/common/status_macros.h"
#include "runtime/transfer/kv_grants.h"
#include "runtime/transfer/kv_slab_mapping.h"

namespace baton::runtime {
namespace {

absl::Status Prefixed(const std::string& prefix, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

// Every rank's shard of `layout`; MakeKvRankShard's InvalidArgument if the layout does not fit.
absl::StatusOr<std::vector<KvRankShard>> RankShards(const KvPoolShape& model_shape,
                                                    const ParallelLayout& layout) {
  std::vector<KvRankShard> shards;
  if (layout.tp_size < 1 || layout.pp_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout ", LayoutString(layout), " has a size below 1"));
  }
  for (int rank_idx = 0; rank_idx < layout.num_ranks(); ++rank_idx) {
    ASSIGN_OR_RETURN(KvRankShard shard, MakeKvRankShard(model_shape, layout, rank_idx));
    shards.push_back(std::move(shard));
  }
  return shards;
}

bool SamePartition(const std::vector<KvRankShard>& a, const std::vector<KvRankShard>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].layer_begin != b[i].layer_begin || a[i].layer_end != b[i].layer_end ||
        a[i].kv_head_begin != b[i].kv_head_begin || a[i].kv_head_end != b[i].kv_head_end ||
        !(a[i].pool_shape == b[i].pool_shape)) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::Status ValidateKvHandoff(const KvHandoff& handoff) {
  if (!handoff.unknown_kv_dtype.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV hand-off: the prefill instance's KV element type \"", handoff.unknown_kv_dtype,
        "\" is unknown here (this build knows f32 and bf16)"));
  }
  absl::StatusOr<std::vector<KvRankShard>> shards = RankShards(handoff.model_shape, handoff.layout);
  if (!shards.ok()) return Prefixed("KV hand-off: prefill ", shards.status());
  if (static_cast<int>(handoff.rank_sources.size()) != handoff.layout.num_ranks()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV hand-off: prefill layout ", LayoutString(handoff.layout), " has ",
        handoff.layout.num_ranks(), " ranks but the hand-off names ", handoff.rank_sources.size(),
        " rank sources"));
  }
  if (handoff.num_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV hand-off: num_tokens ", handoff.num_tokens, " < 0"));
  }
  if (!handoff.kv_grant.empty() && handoff.kv_grant.size() != KvGrants::kTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat("KV hand-off: a KV grant of ",
                                                   handoff.kv_grant.size(), " bytes (expected ",
                                                   KvGrants::kTokenBytes, ")"));
  }
  const int64_t block_size = handoff.model_shape.block_size;
  const int64_t num_blocks_needed = (handoff.num_tokens + block_size - 1) / block_size;
  if (static_cast<int64_t>(handoff.blocks.size()) != num_blocks_needed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV hand-off: ", handoff.num_tokens, " tokens need ", num_blocks_needed, " blocks of ",
        block_size, " but the hand-off names ", handoff.blocks.size()));
  }
  for (size_t i = 0; i < handoff.blocks.size(); ++i) {
    if (handoff.blocks[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("KV hand-off: block ", handoff.blocks[i],
                                                     " (index ", i, ") < 0"));
    }
  }
  return absl::OkStatus();
}

KvHandoff DropLeadingBlocks(KvHandoff handoff, int num_blocks) {
  BATON_CHECK(num_blocks >= 0 && num_blocks <= static_cast<int>(handoff.blocks.size()) &&
              num_blocks * handoff.model_shape.block_size <= handoff.num_tokens);
  handoff.blocks.erase(handoff.blocks.begin(), handoff.blocks.begin() + num_blocks);
  handoff.num_tokens -= num_blocks * handoff.model_shape.block_size;
  return handoff;
}

absl::StatusOr<std::vector<KvPullSpec>> PlanKvPulls(const KvHandoff& handoff,
                                                    const KvPoolShape& decode_model_shape,
                                                    const ParallelLayout& decode_layout) {
  RETURN_IF_ERROR(ValidateKvHandoff(handoff));
  if (!(handoff.model_shape == decode_model_shape)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV hand-off: the prefill instance's model KV (", ShapeString(handoff.model_shape),
        ") differs from the decode instance's (", ShapeString(decode_model_shape), ")"));
  }
  // Validated above: cannot fail.
  ASSIGN_OR_RETURN(const std::vector<KvRankShard> src_shards,
                   RankShards(handoff.model_shape, handoff.layout));
  absl::StatusOr<std::vector<KvRankShard>> dst_shards =
      RankShards(decode_model_shape, decode_layout);
  if (!dst_shards.ok()) return Prefixed("KV hand-off: decode ", dst_shards.status());

  std::vector<KvPullSpec> specs;
  specs.reserve(dst_shards->size());
  if (SamePartition(src_shards, *dst_shards)) {
    for (size_t d = 0; d < dst_shards->size(); ++d) {
      specs.push_back(KvPullSpec{.source = handoff.rank_sources[d],
                                 .shape = src_shards[d].pool_shape,
                                 .src_blocks = handoff.blocks,
                                 .num_tokens = handoff.num_tokens,
                                 .kv_grant = handoff.kv_grant});
    }
    return specs;
  }
  ASSIGN_OR_RETURN(std::vector<std::vector<KvSlab>> slabs,
                   MapKvSlabs(handoff.model_shape, handoff.layout, decode_layout));
  for (std::vector<KvSlab>& rank_slabs : slabs) {
    KvPullSpec spec{.num_tokens = handoff.num_tokens, .kv_grant = handoff.kv_grant};
    spec.rank_sources.resize(src_shards.size());
    // MapKvSlabs gives at most one slab per (decode rank, prefill rank): each source is set once.
    for (const KvSlab& slab : rank_slabs) {
      spec.rank_sources[slab.src_rank_idx] =
          KvRankSource{.source = handoff.rank_sources[slab.src_rank_idx],
                       .shape = src_shards[slab.src_rank_idx].pool_shape,
                       .src_blocks = handoff.blocks};
    }
    spec.slabs = std::move(rank_slabs);
    specs.push_back(std::move(spec));
  }
  return specs;
}

}  // namespace baton::runtime
