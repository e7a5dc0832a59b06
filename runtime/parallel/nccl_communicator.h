// The NCCL Communicator of GPU ranks (one device per rank). Built only when CUDA is on and NCCL is
// found (BATON_HAS_NCCL, target baton_parallel_nccl); no CUDA or NCCL type appears here, so code
// without CUDA may include this header.
//
// Lifecycle: one rank (or the scheduler, for ranks in several processes) calls CreateNcclUniqueId()
// and hands the same id to every rank; each rank thread then calls CreateNcclCommunicator with its
// rank and device, which blocks (up to params.timeout) until every rank has joined. The communicator
// is destroyed on the thread that uses it.
//
// Buffers are device memory of params.device. Every call enqueues its NCCL operation on the
// communicator's stream and waits (polling, up to params.timeout) until it has completed, so the
// result is in the buffer when the call returns OK. A wait past the timeout, or an Abort() from
// another thread, aborts this rank's NCCL communicator (ncclCommAbort) and returns DeadlineExceeded
// or Aborted; later calls return Aborted. Abort() affects this rank only: the instance aborts every
// rank's communicator (the peers of an aborted rank also fail by their own timeout).
//
// Determinism: NCCL's reduction order depends on its algorithm (ring, tree) and the topology, not on
// timing; results match the CPU communicator only within rounding.
//
// Threading: used by the rank's thread only (it makes params.device current); Abort() from any.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/parallel/communicator.h"

namespace baton::runtime {

// The bytes of an ncclUniqueId (NCCL_UNIQUE_ID_BYTES), opaque to the code that relays it.
using NcclUniqueId = std::array<uint8_t, 128>;

// A fresh id for a new group (ncclGetUniqueId). Internal on an NCCL error.
absl::StatusOr<NcclUniqueId> CreateNcclUniqueId();

struct NcclCommunicatorParams {
  int rank = 0;                 // this rank, in [0, num_ranks)
  int num_ranks = 1;            // ranks in the group, >= 1
  int device = 0;               // the CUDA device of this rank
  NcclUniqueId unique_id = {};  // from CreateNcclUniqueId, the same for every rank
  // The cudaStream_t (as void*) the operations are enqueued on, which the caller keeps alive longer
  // than the communicator; nullptr: the communicator creates (and destroys) its own.
  void* stream = nullptr;
  absl::Duration timeout = absl::Seconds(60);  // longest wait of one call (init included), > 0
};

// InvalidArgument for bad params (checked before any CUDA call); DeadlineExceeded if the other
// ranks did not join within the timeout; Internal for CUDA/NCCL failures (no device, ...).
absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    const NcclCommunicatorParams& params);

}  // namespace baton::runtime
