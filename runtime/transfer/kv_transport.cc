#include "runtime/transfer/kv_transport.h"

#include "runtime/transfer/kv_grants.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "runtime/transfer/kv_slab_copy.h"

namespace baton::runtime {

std::string ShapeString(const KvPoolShape& shape) {
  return absl::StrCat("layers ", shape.num_layers, ", kv heads ", shape.num_kv_heads, ", head_dim ",
                      shape.head_dim, ", block_size ", shape.block_size, ", dtype ",
                      std::string(DTypeName(shape.dtype)));
}

namespace {

// num_tokens >= 0, and the number of blocks it needs.
absl::StatusOr<int64_t> NumBlocksNeeded(const KvPullSpec& spec, int block_size) {
  if (spec.num_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV pull: num_tokens ", spec.num_tokens, " < 0"));
  }
  return (static_cast<int64_t>(spec.num_tokens) + block_size - 1) / block_size;
}

// `src_blocks` has num_blocks_needed non-negative ids. `what` prefixes the message.
absl::Status CheckSourceBlocks(std::span<const BlockId> src_blocks, int64_t num_blocks_needed,
                               const KvPullSpec& spec, int block_size, const std::string& what) {
  if (static_cast<int64_t>(src_blocks.size()) != num_blocks_needed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV pull: ", spec.num_tokens, " tokens need ", num_blocks_needed, " blocks of ", block_size,
        " but ", what, " names ", src_blocks.size(), " source blocks"));
  }
  for (size_t i = 0; i < src_blocks.size(); ++i) {
    if (src_blocks[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("KV pull: ", what, ": source block ",
                                                     src_blocks[i], " (index ", i, ") < 0"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckDestinationBlocks(const KvPool& dst, std::span<const BlockId> dst_blocks,
                                    int64_t num_blocks_needed) {
  if (static_cast<int64_t>(dst_blocks.size()) != num_blocks_needed) {
    return absl::InvalidArgumentError(absl::StrCat("KV pull: ", num_blocks_needed,
                                                   " source blocks but ", dst_blocks.size(),
                                                   " destination blocks"));
  }
  std::vector<bool> seen(dst.num_blocks(), false);
  for (size_t i = 0; i < dst_blocks.size(); ++i) {
    const BlockId block = dst_blocks[i];
    if (block < 0 || block >= dst.num_blocks()) {
      return absl::InvalidArgumentError(absl::StrCat("KV pull: destination block ", block,
                                                     " (index ", i, ") outside the pool of ",
                                                     dst.num_blocks(), " blocks"));
    }
    if (seen[block]) {
      return absl::InvalidArgumentError(
          absl::StrCat("KV pull: destination block ", block, " appears twice"));
    }
    seen[block] = true;
  }
  return absl::OkStatus();
}

absl::Status ValidateReslicingPull(const KvPullSpec& spec, const KvPool& dst,
                                   std::span<const BlockId> dst_blocks) {
  const KvPoolShape& dst_shape = dst.shape();
  absl::StatusOr<int64_t> num_blocks_needed = NumBlocksNeeded(spec, dst_shape.block_size);
  if (!num_blocks_needed.ok()) return num_blocks_needed.status();
  // How many slabs cover each destination (layer, KV head).
  std::vector<int> covered(static_cast<size_t>(dst_shape.num_layers) * dst_shape.num_kv_heads, 0);
  std::vector<bool> source_checked(spec.rank_sources.size(), false);
  for (const KvSlab& slab : spec.slabs) {
    if (slab.src_rank_idx < 0 ||
        slab.src_rank_idx >= static_cast<int>(spec.rank_sources.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("KV pull: a slab names prefill rank ", slab.src_rank_idx, " but the spec has ",
                       spec.rank_sources.size(), " rank sources"));
    }
    const KvRankSource& source = spec.rank_sources[slab.src_rank_idx];
    if (absl::Status status = CheckSlabFits(source.shape, dst_shape, slab); !status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("KV pull: prefill rank ", slab.src_rank_idx,
                                                     " (", ShapeString(source.shape),
                                                     "): ", status.message()));
    }
    if (!source_checked[slab.src_rank_idx]) {
      source_checked[slab.src_rank_idx] = true;
      if (absl::Status status =
              CheckSourceBlocks(source.src_blocks, *num_blocks_needed, spec, dst_shape.block_size,
                                absl::StrCat("prefill rank ", slab.src_rank_idx));
          !status.ok()) {
        return status;
      }
    }
    for (int l = slab.dst_layer_idx; l < slab.dst_layer_idx + slab.num_layers(); ++l) {
      for (int h = slab.dst_kv_head_idx; h < slab.dst_kv_head_idx + slab.num_kv_heads(); ++h) {
        ++covered[static_cast<size_t>(l) * dst_shape.num_kv_heads + h];
      }
    }
  }
  for (int l = 0; l < dst_shape.num_layers; ++l) {
    for (int h = 0; h < dst_shape.num_kv_heads; ++h) {
      const int count = covered[static_cast<size_t>(l) * dst_shape.num_kv_heads + h];
      if (count != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "KV pull: destination layer ", l, ", kv head ", h, " is covered by ", count,
            " slabs, not exactly one (destination ", ShapeString(dst_shape), ")"));
      }
    }
  }
  return CheckDestinationBlocks(dst, dst_blocks, *num_blocks_needed);
}

}  // namespace

absl::Status ValidatePull(const KvPullSpec& spec, const KvPool& dst,
                          std::span<const BlockId> dst_blocks) {
  if (!spec.kv_grant.empty() && spec.kv_grant.size() != KvGrants::kTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat("KV pull: a KV grant of ", spec.kv_grant.size(),
                                                   " bytes (expected ", KvGrants::kTokenBytes,
                                                   ")"));
  }
  if (spec.resliced()) return ValidateReslicingPull(spec, dst, dst_blocks);
  if (!(spec.shape == dst.shape())) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV pull: source pool shape (", ShapeString(spec.shape),
                     ") differs from the destination's (", ShapeString(dst.shape()),
                     "); to re-slice across TP/PP layouts, give a re-slicing spec (KvPullSpec::slabs)"));
  }
  absl::StatusOr<int64_t> num_blocks_needed = NumBlocksNeeded(spec, spec.shape.block_size);
  if (!num_blocks_needed.ok()) return num_blocks_needed.status();
  if (absl::Status status = CheckSourceBlocks(spec.src_blocks, *num_blocks_needed, spec,
                                              spec.shape.block_size, "the spec");
      !status.ok()) {
    return status;
  }
  return CheckDestinationBlocks(dst, dst_blocks, *num_blocks_needed);
}

}  // namespace baton::runtime
