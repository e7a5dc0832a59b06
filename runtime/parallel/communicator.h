// Communicator: the collectives and point-to-point transfers between the ranks of one instance
// (DESIGN.md, "Parallelism per phase"). TP ranks all-reduce the outputs of the o_proj and down_proj
// products; PP stages send the residual stream to the next stage.
//
// Lifecycle: an instance of tp × pp ranks runs in one worker process, one thread per rank, ranks
// ordered stage-major (rank = pp_rank * tp_size + tp_rank). The instance creates one group
// (CpuCommGroup for CPU ranks, an NCCL unique id for GPU ranks) and hands each rank thread its own
// Communicator, which it keeps for the life of the rank. Every rank calls the collectives in the same
// order with the same sizes; a Send from rank a to rank b is matched, in order, by a Recv on b from a.
//
// Failure: a call that cannot complete returns instead of hanging. Each implementation has a
// configured timeout (its params); a call that waits longer for a peer returns DeadlineExceeded, and
// a collective that timed out aborts the group, because its peers can no longer complete it. Abort()
// (from any thread, e.g. the supervisor of a rank that failed) wakes every waiter of the group with
// Aborted; every later call of every rank returns Aborted. An aborted group is not reused: the
// instance creates a new one.
//
// Pointers: host memory for the CPU implementation, device memory of the rank's GPU for NCCL.
// Counts are elements of the stated dtype; sizes are bytes.
//
// Threading: each rank's Communicator is used by one thread, the rank's; only Abort() may be called
// from another thread.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "kernels/common/dtype.h"

namespace baton::runtime {

class Communicator {
 public:
  virtual ~Communicator() = default;

  // This rank's index in [0, size()), and the number of ranks in the group.
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Replaces data[i] with the sum over the ranks of their data[i], for i < count. dtype is kF32 or
  // kBF16 (bf16: accumulated in f32, rounded to bf16 once); kF16 is InvalidArgument. Every rank passes
  // the same count and dtype. data: [count].
  virtual absl::Status AllReduceSum(void* data, size_t count, DType dtype) = 0;
  absl::Status AllReduceSum(float* data, size_t count) {
    return AllReduceSum(data, count, DType::kF32);
  }

  // recv[r * bytes_per_rank, (r + 1) * bytes_per_rank) = rank r's send, for every rank r.
  // send: [bytes_per_rank] bytes; recv: [size() * bytes_per_rank] bytes; they must not overlap.
  virtual absl::Status AllGather(const void* send, void* recv, size_t bytes_per_rank) = 0;

  // Copies root's data[0, bytes) into every rank's data. data: [bytes] bytes.
  virtual absl::Status Broadcast(void* data, size_t bytes, int root) = 0;

  // Sends data[0, bytes) to rank `peer`, whose matching Recv(.., bytes, this rank) receives it.
  // Send and Recv between stages pair in issue order; a pair with different sizes is InvalidArgument
  // on the receiver. Whether Send returns before the Recv is posted is the implementation's (the CPU
  // one buffers; NCCL completes both together, so a stage must not Send to a peer that is itself
  // blocked in a Send to it).
  virtual absl::Status Send(const void* data, size_t bytes, int peer) = 0;
  virtual absl::Status Recv(void* data, size_t bytes, int peer) = 0;

  // Returns once every rank has called Barrier.
  virtual absl::Status Barrier() = 0;

  // Aborts the whole group: wakes every waiting rank with Aborted (naming `reason`); later calls of
  // every rank return Aborted. Idempotent; the first reason is kept. Thread-safe.
  virtual void Abort(absl::string_view reason) = 0;
};

}  // namespace baton::runtime
