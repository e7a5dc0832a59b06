// Choosing a KV transport: shared memory when the source pool is on this host, TCP otherwise.
//
// The prefill worker publishes a KvSource (LocalKvSource: its host identity, its pool's shm name,
// its KvServer address). The decode worker's AutoKvTransport picks, per pull, ShmTransport when the
// source is on the same host (same hostname AND same boot id) and its segment can be mapped now,
// and TcpKvTransport otherwise. GPU transports (CUDA IPC, NCCL) will be chosen here too, behind
// BATON_HAS_CUDA; this file is one of the three kinds allowed to test that macro.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "runtime/transfer/kv_transport.h"
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
// a private pool) and `tcp_address` (its KvServer's address(), or "" if it runs none).
KvSource LocalKvSource(const KvPool& pool, std::string tcp_address);

// True if `source` runs on the machine `local` describes: equal non-empty hostnames and equal
// non-empty boot ids (a hostname alone is not enough: containers share names; a boot id alone
// neither: cloned VMs can share one until reboot).
bool IsSameHost(const KvSource& source, const HostIdentity& local);

enum class KvTransportKind { kShm, kTcp };
std::string_view KvTransportKindName(KvTransportKind kind);

class AutoKvTransport : public KvTransport {
 public:
  explicit AutoKvTransport(HostIdentity local = LocalHostIdentity()) : local_(std::move(local)) {}

  // kShm if the source is on this host, names a segment, and the segment maps and is live;
  // otherwise kTcp if it names a TCP address. Otherwise the shm failure (Unavailable, e.g. the
  // owner is gone), or InvalidArgument if the source names no usable route at all.
  absl::StatusOr<KvTransportKind> Select(const KvSource& source);

  // Validates, selects, then delegates to the chosen transport (see KvTransport::Pull). A
  // re-slicing spec goes to shm when every prefill rank a slab names selects kShm, else to TCP.
  absl::Status Pull(const KvPullSpec& spec, const KvPool& dst, std::span<const BlockId> dst_blocks,
                    absl::Time deadline) override;
  std::string_view name() const override { return "auto"; }

  ShmTransport& shm() { return shm_; }
  TcpKvTransport& tcp() { return tcp_; }

 private:
  const HostIdentity local_;
  ShmTransport shm_;
  TcpKvTransport tcp_;
};

// The transport a decode worker on the CPU backend uses: an AutoKvTransport for this host.
std::unique_ptr<KvTransport> MakeKvTransport();

}  // namespace baton::runtime
