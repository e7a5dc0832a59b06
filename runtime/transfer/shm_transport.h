// ShmTransport: pulls KV blocks from a pool on the same host through its shared-memory segment.
//
// The source pool is a KvPool created with a shm name (KvPoolOptions::shm_name); this process maps
// it read-only (KvPoolMapping) once per name and keeps the mapping cached, then copies each run of
// blocks that is contiguous on both sides with exactly one memcpy, on the calling thread. Before
// each pull it checks that the segment still exists under its name and its owner process is alive,
// so a dead prefill worker gives Unavailable, not stale bytes; a stale mapping is dropped from the
// cache. Thread-safe.
#pragma once

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
  // own shape differs from spec.shape. The deadline is checked before the first copy and between
  // runs (a memcpy cannot block).
  absl::Status Pull(const KvPullSpec& spec, const KvPool& dst, std::span<const BlockId> dst_blocks,
                    absl::Time deadline) override;
  std::string_view name() const override { return "shm"; }

  // The live mapping of `shm_name`, from the cache or freshly opened (then cached). Unavailable if
  // the segment cannot be opened or its owner is gone; see KvPoolMapping::Open for the other codes.
  absl::StatusOr<std::shared_ptr<const KvPoolMapping>> LiveMapping(const std::string& shm_name);

  int num_cached_mappings() const;

 private:
  mutable std::mutex mu_;
  // Guarded by mu_. Keyed by shm name.
  absl::flat_hash_map<std::string, std::shared_ptr<const KvPoolMapping>> mappings_;
};

}  // namespace baton::runtime
