// KvPoolMapping: a read-only view, in another process, of a KvPool created with a shm name.
//
// Open maps the whole segment (MAP_SHARED, PROT_READ) and reads its KvSegmentHeader, so the shape
// and block count come from the owner, not from the caller. The mapping stays valid after the owner
// unlinks the segment or exits (the pages live until the last mapping goes), which is why callers
// ask CheckLive() before trusting the bytes. Immutable after Open; thread-safe.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/kv_cache/kv_pool.h"

namespace baton::runtime {

class KvPoolMapping {
 public:
  // Unavailable if no such segment exists (its owner never created it or has gone) or its owner has
  // not finished initializing it; FailedPrecondition if it is not a Baton KV segment of this
  // version, its header names an element type this build does not know, or its size disagrees
  // with its header; InvalidArgument for a malformed name.
  static absl::StatusOr<std::unique_ptr<KvPoolMapping>> Open(const std::string& shm_name);

  ~KvPoolMapping();
  KvPoolMapping(const KvPoolMapping&) = delete;
  KvPoolMapping& operator=(const KvPoolMapping&) = delete;

  const std::string& shm_name() const { return shm_name_; }
  const KvPoolShape& shape() const { return shape_; }
  int num_blocks() const { return num_blocks_; }
  int64_t owner_pid() const { return owner_pid_; }
  size_t BlockBytes() const { return shape_.BlockBytes(); }

  // Start of block `block` (BlockBytes() bytes). Pre-condition: 0 <= block < num_blocks().
  const std::byte* BlockData(BlockId block) const;

  // OK while the segment is still linked under its name as this same object and its owner process
  // exists; Unavailable (naming the reason) otherwise. A few syscalls; called once per pull.
  absl::Status CheckLive() const;

 private:
  KvPoolMapping() = default;

  std::string shm_name_;
  KvPoolShape shape_;
  int num_blocks_ = 0;
  int64_t owner_pid_ = 0;
  const std::byte* mapping_ = nullptr;  // [mapping_bytes_]: header page, then the blocks at data_
  size_t mapping_bytes_ = 0;
  const std::byte* data_ = nullptr;  // [num_blocks_, BlockBytes()]
  dev_t device_ = 0;                 // identity of the mapped object, to detect a re-created name
  ino_t inode_ = 0;
};

}  // namespace baton::runtime
