// CpuCommGroup: the Communicator of CPU ranks that are threads of one process. The ranks exchange
// pointers to their buffers through the group and copy directly between them (shared memory, no
// serialization).
//
// Lifecycle: CpuCommGroup::Create(params) once per instance; each rank thread takes its communicator
// with Join(rank), once per rank, and keeps it for the life of the rank. Each communicator holds the
// group, so the group lives as long as its last communicator; Abort() on the group (or on any of its
// communicators) aborts every rank.
//
// Determinism: AllReduceSum computes, for every element, ((x_0 + x_1) + x_2) + ... in rank order,
// whatever order the ranks arrive in, so the result is bit-identical run to run and equal to a
// sequential sum in rank order. bf16 inputs are widened to f32, summed in f32 in rank order, and
// rounded to bf16 once (round to nearest even). The reduce work is split by element ranges: rank r
// reduces the r-th of size() equal slices into a group scratch buffer, then every rank copies the
// whole result out (two barriers per all-reduce). A rank waiting in a barrier polls for up to 20 us
// before it sleeps, when the machine has a core per rank.
//
// Send buffers: Send copies the bytes into a per-(src, dst) FIFO mailbox and returns without waiting
// for the Recv; the mailbox is unbounded.
//
// Timeouts: every blocking call waits at most params.timeout for its peers (DeadlineExceeded); a
// collective that timed out aborts the group. A Recv that timed out leaves the mailbox unchanged and
// the group usable.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/parallel/communicator.h"

namespace baton::runtime {

struct CpuCommGroupParams {
  int num_ranks = 1;                          // ranks in the group, >= 1
  absl::Duration timeout = absl::Seconds(60);  // longest wait for peers in one call, > 0
};

class CpuCommGroupState;

class CpuCommGroup {
 public:
  // InvalidArgument for num_ranks < 1 or a non-positive timeout.
  static absl::StatusOr<std::shared_ptr<CpuCommGroup>> Create(const CpuCommGroupParams& params);

  // The communicator of `rank`. InvalidArgument for a rank outside [0, num_ranks),
  // FailedPrecondition if that rank has already joined. Thread-safe.
  absl::StatusOr<std::unique_ptr<Communicator>> Join(int rank);

  // Aborts the group (see Communicator::Abort). Thread-safe.
  void Abort(absl::string_view reason);

  int num_ranks() const;

 private:
  explicit CpuCommGroup(std::shared_ptr<CpuCommGroupState> state);
  std::shared_ptr<CpuCommGroupState> state_;
};

}  // namespace baton::runtime
