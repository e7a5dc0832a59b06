#include "runtime/transfer/kv_transport.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace baton::runtime {

std::string ShapeString(const KvPoolShape& shape) {
  return absl::StrCat("layers ", shape.num_layers, ", kv heads ", shape.num_kv_heads, ", head_dim ",
                      shape.head_dim, ", block_size ", shape.block_size);
}

absl::Status ValidatePull(const KvPullSpec& spec, const KvPool& dst,
                          std::span<const BlockId> dst_blocks) {
  if (!(spec.shape == dst.shape())) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV pull: source pool shape (", ShapeString(spec.shape),
                     ") differs from the destination's (", ShapeString(dst.shape()),
                     "); host transports do not re-slice across TP/PP layouts"));
  }
  if (spec.num_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV pull: num_tokens ", spec.num_tokens, " < 0"));
  }
  const int64_t block_size = spec.shape.block_size;
  const int64_t num_blocks_needed = (spec.num_tokens + block_size - 1) / block_size;
  if (static_cast<int64_t>(spec.src_blocks.size()) != num_blocks_needed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV pull: ", spec.num_tokens, " tokens need ", num_blocks_needed, " blocks of ", block_size,
        " but the spec names ", spec.src_blocks.size(), " source blocks"));
  }
  if (dst_blocks.size() != spec.src_blocks.size()) {
    return absl::InvalidArgumentError(absl::StrCat("KV pull: ", spec.src_blocks.size(),
                                                   " source blocks but ", dst_blocks.size(),
                                                   " destination blocks"));
  }
  for (size_t i = 0; i < spec.src_blocks.size(); ++i) {
    if (spec.src_blocks[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("KV pull: source block ", spec.src_blocks[i], " (index ", i, ") < 0"));
    }
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

}  // namespace baton::runtime
