// KvLink: the device-to-device channel of one prefill rank and one decode rank, over which the NCCL
// KV transport (nccl_kv_transport.h) moves KV blocks between pools in device memory. It is the thin
// seam between that transport, written once, and what carries the bytes:
//   - NcclKvLink (nccl_kv_link.h, built with CUDA and NCCL): a two-rank NCCL communicator; Send and
//     Recv are one ncclGroupStart/End around one ncclSend (ncclRecv) per span, on the link's own
//     stream on the rank's device;
//   - EmulatedKvLink (emulated_kv_link.h, every build): the `cuda-emulated` device's, whose device
//     memory is host memory: the same calls over a TCP socket between the two processes, so that CI
//     runs the id relay, the join and the send/recv order of the transport without a GPU.
//
// Lifecycle (as NCCL's): one side calls NewId(), which makes a fresh id and (NCCL's bootstrap root;
// the emulated listener) a rendezvous in its own process, and hands the id to its peer; both call
// Join(id, rank) — rank 0 the sender (prefill), rank 1 the receiver (decode) — which returns once
// both have joined. In Baton the prefill rank's KvServer makes the id when a decode rank asks for
// a link on its KV control connection and answers it there (tcp_wire.h), so an id is only made
// once the server has accepted the link and is about to join it. An id joins one link once. A
// link is used by one thread at a time.
//
// Matching: the k-th span of a Send pairs with the k-th span of the peer's Recv, in order, and the
// two must have the same size (NCCL truncates or hangs otherwise; the emulated link answers
// Internal, naming both sizes, so a protocol bug fails in CI). Every call waits at most until its
// deadline: past it, or on any error, the link is broken (NCCL: ncclCommAbort) and every later call
// fails; its owner drops it and joins a new one. A broken or destroyed link makes its peer's pending
// call fail too (emulated: at once; NCCL: by the peer's own deadline).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace baton::runtime {

// The bytes of an NCCL unique id (NCCL_UNIQUE_ID_BYTES); opaque to the code that relays it.
using KvLinkId = std::array<uint8_t, 128>;

// Bytes [data, data + num_bytes) of a device pool.
struct KvDeviceSpan {
  std::byte* data = nullptr;
  size_t num_bytes = 0;
};

inline constexpr int kKvLinkSenderRank = 0;    // the prefill rank
inline constexpr int kKvLinkReceiverRank = 1;  // the decode rank

class KvLink {
 public:
  virtual ~KvLink() = default;

  // Sends the spans, in order, to the peer's matching Recv; returns once every byte has left this
  // side (the buffers may be reused). Codes: DeadlineExceeded, Unavailable (the peer is gone),
  // Internal (a span size the peer did not expect, a device error), FailedPrecondition (broken).
  virtual absl::Status Send(std::span<const KvDeviceSpan> spans, absl::Time deadline) = 0;
  // Receives into the spans, in order; returns once every byte has landed. Codes as Send.
  virtual absl::Status Recv(std::span<const KvDeviceSpan> spans, absl::Time deadline) = 0;
};

class KvLinkFactory {
 public:
  virtual ~KvLinkFactory() = default;

  // "nccl" or "nccl-emulated": what a KvSource advertises (KvSource::kv_link), so that a decode
  // worker pulls over a link only from a prefill worker whose pools it can reach through one.
  virtual std::string_view name() const = 0;

  // A fresh id, with its rendezvous in this process until the link is joined (or the factory
  // destroyed). Internal on failure.
  virtual absl::StatusOr<KvLinkId> NewId() = 0;

  // Joins link `id` as `rank` (kKvLinkSenderRank or kKvLinkReceiverRank) on CUDA device `device`
  // (ignored by the emulated link). Returns once both ranks have joined. InvalidArgument for a bad
  // rank or an id this factory cannot read; DeadlineExceeded if the peer does not join in time;
  // Unavailable if the rendezvous cannot be reached; Internal for a device or NCCL error.
  virtual absl::StatusOr<std::unique_ptr<KvLink>> Join(const KvLinkId& id, int rank, int device,
                                                       absl::Time deadline) = 0;
};

}  // namespace baton::runtime
