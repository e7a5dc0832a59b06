// ShmTransport: pulls KV blocks from a pool on the same host through its shared-memory segment.
//
// The source pool is a KvPool created with a shm name (KvPoolOptions::shm_name); this process maps
// it read-only (KvPoolMapping) once per name and keeps the mapping cached, then copies each run of
// blocks that is contiguous on both sides with exactly one memcpy, on the calling thread. Before
// each pull it checks that the segment still exists under its name and its owner process is alive,
// so a dead prefill worker gives Unavailable, not stale bytes; a stale mapping is dropped from the
// cache. Thread-safe.
//
// Re-slicing specs (KvPullSpec::slabs, kv_transport.h "Shapes"): every prefill rank a slab names is
// mapped and checked first (live, shape, block ids), then each slab is copied as the byte ranges of
// SlabByteRanges (kv_slab_copy.h): 2 x layers contiguous ranges per block, merged where both sides
// continue. Same-shape specs keep the whole-block run copies above.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/transfer/kv_pool_mapping.h"
#include "runtime/transfer/kv_transport.h"

namespace baton::runtime {

class ShmTransport : public KvTransport {
 public:
  // See KvTransport::Pull. Also InvalidArgument if spec.source.shm_name is empty or the segment's
  // own shape differs from spec.shape (for a re-slicing spec: per prefill rank a slab names, its
  // rank source's shm_name and shape). The deadline is checked before the first copy and between
  // runs (a memcpy cannot block).
  absl::Status Pull(const KvPullSpec& spec, const KvPool& dst, std::span<const BlockId> dst_blocks,
                    const KvPullWait& wait) override;
  std::string_view name() const override { return "shm"; }

  // The live mapping of `shm_name`, from the cache or freshly opened (then cached). Unavailable if
  // the segment cannot be opened or its owner is gone; see KvPoolMapping::Open for the other codes.
  absl::StatusOr<std::shared_ptr<const KvPoolMapping>> LiveMapping(const std::string& shm_name);

  int num_cached_mappings() const;
  // Bytes written into destination pools by successful pulls so far (all threads).
  int64_t num_bytes_copied() const { return num_bytes_copied_.load(std::memory_order_relaxed); }

 private:
  // Pull of a validated re-slicing spec.
  absl::Status PullSlabs(const KvPullSpec& spec, const KvPool& dst,
                         std::span<const BlockId> dst_blocks, absl::Time deadline);

  mutable std::mutex mu_;
  // Guarded by mu_. Keyed by shm name.
  absl::flat_hash_map<std::string, std::shared_ptr<const KvPoolMapping>> mappings_;
  std::atomic<int64_t> num_bytes_copied_{0};
};

}  // namespace baton::runtime
