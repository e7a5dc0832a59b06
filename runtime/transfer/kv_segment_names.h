// Names of shared KV pool segments, and the cleanup of segments whose owner died.
//
// A shared KvPool's segment is named "/baton-kv-<pid>-<index>" after the process that creates it
// (Linux shows it as /dev/shm/baton-kv-<pid>-<index>). A pool's destructor unlinks its segment; a
// SIGKILLed (or crashed) worker cannot, so `baton serve` calls RemoveStaleKvSegments(pid) when it
// reaps a worker, and RemoveOrphanedKvSegments() at start-up (for a launcher that died itself).
// Linux-specific: enumeration reads /dev/shm.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace baton::runtime {

// "/baton-kv-<pid>-<index>".
std::string KvSegmentName(int64_t pid, int index);

// KvSegmentName(getpid(), n) with n a per-process counter: a fresh name on every call.
std::string NewKvSegmentName();

// Unlinks every segment named after `pid`. Returns how many were removed; Internal if /dev/shm
// cannot be read. Call only once `pid` has exited (the segments of a live process would vanish
// under it).
absl::StatusOr<int> RemoveStaleKvSegments(int64_t pid);

// Unlinks the Baton KV segments whose creating process no longer exists (kill(pid, 0) == ESRCH in
// this pid namespace). Returns how many were removed.
absl::StatusOr<int> RemoveOrphanedKvSegments();

}  // namespace baton::runtime
