// EmulatedKvLink: the KvLink of the `cuda-emulated` device (kv_link.h), whose "device" memory is
// host memory. It stands where NCCL stands for real GPUs and keeps NCCL's protocol, so that the
// NCCL KV transport's own code (the id relay, who joins as which rank, the order and sizes of its
// sends and receives, what a broken link does) runs in CI, across processes, without a GPU:
//   - NewId() opens a listening socket (NCCL's bootstrap root) and writes its address and a random
//     nonce (16 bytes from getrandom) into the id's 128 bytes;
//   - Join() of the process holding that listener accepts the peer's connection (checking the nonce
//     and that the peer joins as the other rank); the other process connects to the address. An id
//     joins one link: the listener is closed once the peer has joined. The nonce is the link's
//     credential: the id travels only over the KV server's authenticated connection (tcp_wire.h),
//     so a caller without the deployment secret cannot join; connections that do not say the nonce
//     within 2 s are dropped, so stray callers cannot hold the rendezvous up;
//   - Send writes each span behind an 8-byte size; Recv reads the size and refuses (Internal, both
//     sizes named) a span its peer sent with another size, as NCCL requires equal sizes.
// Errors close the socket, so the peer's pending call ends with Unavailable at once.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "runtime/transfer/kv_link.h"
#include "runtime/transfer/socket_io.h"

namespace baton::runtime {

class EmulatedKvLinkFactory final : public KvLinkFactory {
 public:
  // `host`: the address NewId() listens on; `advertise_host` what it writes into the id, which the
  // peer must reach (empty: ReachableHost(host), socket_io.h).
  explicit EmulatedKvLinkFactory(std::string host = "127.0.0.1", std::string advertise_host = "")
      : host_(std::move(host)), advertise_host_(std::move(advertise_host)) {}

  std::string_view name() const override { return "nccl-emulated"; }
  absl::StatusOr<KvLinkId> NewId() override;
  absl::StatusOr<std::unique_ptr<KvLink>> Join(const KvLinkId& id, int rank, int device,
                                               absl::Time deadline) override;

 private:
  const std::string host_;
  const std::string advertise_host_;
  absl::Mutex mu_;
  struct Rendezvous {
    UniqueFd listener;
    absl::Time created;
  };
  // Listeners of ids made here and not yet joined, by nonce. An id whose peer never joined (its
  // relay failed) is dropped by a later NewId once it is older than kRendezvousLifetime.
  std::map<std::string, Rendezvous> rendezvous_ ABSL_GUARDED_BY(mu_);
  static constexpr absl::Duration kRendezvousLifetime = absl::Minutes(5);
};

}  // namespace baton::runtime
