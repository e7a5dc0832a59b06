#include "runtime/transfer/shm_transport.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/kv_cache/block_runs.h"
#include "runtime/transfer/kv_slab_copy.h"

namespace baton::runtime {

absl::StatusOr<std::shared_ptr<const KvPoolMapping>> ShmTransport::LiveMapping(
    const std::string& shm_name) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = mappings_.find(shm_name);
    if (it != mappings_.end()) {
      std::shared_ptr<const KvPoolMapping> cached = it->second;
      if (cached->CheckLive().ok()) return cached;
      mappings_.erase(it);  // gone or re-created: reopen below
    }
  }
  absl::StatusOr<std::unique_ptr<KvPoolMapping>> opened = KvPoolMapping::Open(shm_name);
  if (!opened.ok()) return opened.status();
  std::shared_ptr<const KvPoolMapping> mapping = std::move(*opened);
  if (absl::Status live = mapping->CheckLive(); !live.ok()) return live;
  std::lock_guard<std::mutex> lock(mu_);
  // A concurrent pull may have cached the same segment meanwhile; either mapping is fine.
  mappings_[shm_name] = mapping;
  return mapping;
}

int ShmTransport::num_cached_mappings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(mappings_.size());
}

absl::Status ShmTransport::Pull(const KvPullSpec& spec, const KvPool& dst,
                                std::span<const BlockId> dst_blocks, const KvPullWait& wait) {
  const absl::Time deadline = wait.deadline;
  if (absl::Status status = ValidatePull(spec, dst, dst_blocks); !status.ok()) return status;
  if (spec.resliced()) return PullSlabs(spec, dst, dst_blocks, deadline);
  if (spec.source.shm_name.empty()) {
    return absl::InvalidArgumentError("KV pull over shm: the source names no shm segment");
  }
  if (spec.src_blocks.empty()) return absl::OkStatus();
  if (absl::Now() >= deadline) {
    return absl::DeadlineExceededError(absl::StrCat("KV pull from \"", spec.source.shm_name,
                                                    "\": deadline passed before the copy"));
  }
  absl::StatusOr<std::shared_ptr<const KvPoolMapping>> mapping = LiveMapping(spec.source.shm_name);
  if (!mapping.ok()) return mapping.status();
  const KvPoolMapping& src = **mapping;
  if (!(src.shape() == spec.shape)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV pull: segment \"", src.shm_name(), "\" holds a pool of shape (",
        ShapeString(src.shape()), ") but the spec says (", ShapeString(spec.shape), ")"));
  }
  for (const BlockId block : spec.src_blocks) {
    if (block >= src.num_blocks()) {
      return absl::InvalidArgumentError(absl::StrCat("KV pull: source block ", block,
                                                     " outside the pool of ", src.num_blocks(),
                                                     " blocks in \"", src.shm_name(), "\""));
    }
  }
  const size_t block_bytes = dst.BlockBytes();
  const std::vector<BlockRun> runs = CoalesceBlockRuns(spec.src_blocks, dst_blocks);
  for (size_t i = 0; i < runs.size(); ++i) {
    if (i > 0 && absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("KV pull from \"", src.shm_name(),
                                                      "\": deadline passed after ", i, " of ",
                                                      runs.size(), " runs"));
    }
    const BlockRun& run = runs[i];
    std::memcpy(dst.BlockData(run.dst_start), src.BlockData(run.src_start),
                block_bytes * run.num_blocks);
  }
  num_bytes_copied_.fetch_add(static_cast<int64_t>(block_bytes * spec.src_blocks.size()),
                              std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status ShmTransport::PullSlabs(const KvPullSpec& spec, const KvPool& dst,
                                     std::span<const BlockId> dst_blocks, absl::Time deadline) {
  if (dst_blocks.empty()) return absl::OkStatus();
  // Map (and check) every prefill rank a slab names, once, before copying anything.
  std::vector<std::shared_ptr<const KvPoolMapping>> mappings(spec.rank_sources.size());
  for (const KvSlab& slab : spec.slabs) {
    const int rank_idx = slab.src_rank_idx;
    if (mappings[rank_idx] != nullptr) continue;
    const KvRankSource& source = spec.rank_sources[rank_idx];
    if (source.source.shm_name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "KV pull over shm: prefill rank ", rank_idx, "'s source names no shm segment"));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("KV pull from \"", source.source.shm_name,
                                                      "\": deadline passed before the copy"));
    }
    absl::StatusOr<std::shared_ptr<const KvPoolMapping>> mapping =
        LiveMapping(source.source.shm_name);
    if (!mapping.ok()) return mapping.status();
    const KvPoolMapping& src = **mapping;
    if (!(src.shape() == source.shape)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "KV pull: segment \"", src.shm_name(), "\" (prefill rank ", rank_idx,
          ") holds a pool of shape (", ShapeString(src.shape()), ") but the spec says (",
          ShapeString(source.shape), ")"));
    }
    for (const BlockId block : source.src_blocks) {
      if (block >= src.num_blocks()) {
        return absl::InvalidArgumentError(absl::StrCat("KV pull: source block ", block,
                                                       " outside the pool of ", src.num_blocks(),
                                                       " blocks in \"", src.shm_name(), "\""));
      }
    }
    mappings[rank_idx] = *std::move(mapping);
  }
  std::byte* const dst_base = dst.BlockData(0);
  int64_t bytes = 0;
  for (size_t i = 0; i < spec.slabs.size(); ++i) {
    const KvSlab& slab = spec.slabs[i];
    const KvRankSource& source = spec.rank_sources[slab.src_rank_idx];
    const KvPoolMapping& src = *mappings[slab.src_rank_idx];
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("KV pull from \"", src.shm_name(),
                                                      "\": deadline passed after ", i, " of ",
                                                      spec.slabs.size(), " slabs"));
    }
    const std::vector<KvByteRange> ranges =
        SlabByteRanges(src.shape(), dst.shape(), slab, source.src_blocks, dst_blocks);
    CopyByteRanges(src.BlockData(0), dst_base, ranges);
    bytes += TotalBytes(ranges);
  }
  num_bytes_copied_.fetch_add(bytes, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace baton::runtime
