// Choosing a KV transport: for pools in host memory, shared memory when the source pool is on this
// host and TCP otherwise; for pools in device memory, KV links (NCCL, or its emulation).
//
// The prefill worker publishes a KvSource per rank (LocalKvSource: its host identity, its pool's
// shm name, its KvServer address, and for a device pool the kind of KV link it serves). The decode
// worker's AutoKvTransport picks, per pull: NcclKvTransport when its destination pool is in device
// memory (the sources must serve the same kind of link); else ShmTransport when the source is on
// the same host (same hostname AND same boot id) and its segment can be mapped now, and
// TcpKvTransport otherwise. A host pool never pulls from a device pool nor the reverse: prefill
// and decode workers run on the same kind of device. This file is one of the three kinds allowed
// to test BATON_HAS_NCCL.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "runtime/transfer/kv_link.h"
#include "runtime/transfer/kv_transport.h"
#include "runtime/transfer/nccl_kv_transport.h"
#include "runtime/transfer/shm_transport.h"
#include "runtime/transfer/tcp_transport.h"

namespace baton::runtime {

struct HostIdentity {
  std::string hostname;  // gethostname()
  std::string boot_id;   // /proc/sys/kernel/random/boot_id, "" if unreadable
};

// This machine's identity (read on first call, then cached). Thread-safe.
const HostIdentity& LocalHostIdentity();

// The KvSource a prefill worker publishes for `pool`: this host's identity, pool.shm_name() ("" for
// a private pool), `tcp_address` (its KvServer's address(), or "" if it runs none) and `kv_link`
// (the kind of KV link its KvServer serves a device pool over; "" for a host pool).
KvSource LocalKvSource(const KvPool& pool, std::string tcp_address, std::string kv_link = "");

// The KV link factory of `kind`: "nccl-emulated" (every build; the cuda-emulated device's, whose
// rendezvous listens on `host` and is dialled at `advertise_host`, empty: ReachableHost(host)) or
// "nccl" (builds with NCCL; Unimplemented otherwise).
// InvalidArgument for another kind.
absl::StatusOr<std::unique_ptr<KvLinkFactory>> MakeKvLinkFactory(
    std::string_view kind, const std::string& host, const std::string& advertise_host = "");

// True if `source` runs on the machine `local` describes: equal non-empty hostnames and equal
// non-empty boot ids (a hostname alone is not enough: containers share names; a boot id alone
// neither: cloned VMs can share one until reboot).
bool IsSameHost(const KvSource& source, const HostIdentity& local);

enum class KvTransportKind { kShm, kTcp };
std::string_view KvTransportKindName(KvTransportKind kind);

class AutoKvTransport : public KvTransport {
 public:
  // `links`: the factory of the KV links pools in device memory pull over; null: this worker's pools
  // are in host memory.
  // `secret`: the deployment secret every TCP connection presents to a KvServer; empty: none.
  // `link_options.secret` is presented on every connection, TCP's too.
  explicit AutoKvTransport(HostIdentity local = LocalHostIdentity(),
                           std::unique_ptr<KvLinkFactory> links = nullptr,
                           NcclKvTransportOptions link_options = {});

  // kShm if the source is on this host, names a segment, and the segment maps and is live;
  // otherwise kTcp if it names a TCP address. Otherwise the shm failure (Unavailable, e.g. the
  // owner is gone), or InvalidArgument if the source names no usable route at all.
  absl::StatusOr<KvTransportKind> Select(const KvSource& source);

  // Validates, selects, then delegates to the chosen transport (see KvTransport::Pull). A
  // destination in device memory goes to the link transport (InvalidArgument if there is none); a
  // host destination whose source serves a device pool is InvalidArgument. A re-slicing spec goes
  // to shm when every prefill rank a slab names selects kShm, else to TCP.
  absl::Status Pull(const KvPullSpec& spec, const KvPool& dst, std::span<const BlockId> dst_blocks,
                    const KvPullWait& wait) override;
  std::string_view name() const override { return "auto"; }

  ShmTransport& shm() { return shm_; }
  TcpKvTransport& tcp() { return tcp_; }
  NcclKvTransport* links() { return nccl_.get(); }

 private:
  const HostIdentity local_;
  ShmTransport shm_;
  TcpKvTransport tcp_;
  std::unique_ptr<KvLinkFactory> link_factory_;  // null for host pools
  std::unique_ptr<NcclKvTransport> nccl_;        // over link_factory_
};

// The transport a decode worker uses: an AutoKvTransport for this host, pulling pools in device
// memory over KV links of `link_kind` ("" for a worker whose pools are in host memory; otherwise as
// MakeKvLinkFactory, whose errors it returns), keeping up to `max_idle_links` of them warm.
absl::StatusOr<std::unique_ptr<KvTransport>> MakeKvTransport(std::string_view link_kind = "",
                                                             const std::string& host = "127.0.0.1",
                                                             const std::string& secret = "",
                                                             int max_idle_links = 8);

}  // namespace baton::runtime
