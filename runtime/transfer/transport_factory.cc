#include "runtime/transfer/transport_factory.h"

#include <unistd.h>

#include <fstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "runtime/transfer/emulated_kv_link.h"
#include "runtime/transfer/rank_pulls.h"
#if BATON_HAS_NCCL
#include "runtime/transfer/nccl_kv_link.h"
#endif

namespace baton::runtime {
namespace {

HostIdentity ReadHostIdentity() {
  HostIdentity identity;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0) identity.hostname = name;
  std::ifstream boot_id("/proc/sys/kernel/random/boot_id");
  std::string line;
  if (boot_id && std::getline(boot_id, line)) {
    identity.boot_id = std::string(absl::StripAsciiWhitespace(line));
  }
  return identity;
}

}  // namespace

const HostIdentity& LocalHostIdentity() {
  static const HostIdentity* const identity = new HostIdentity(ReadHostIdentity());
  return *identity;
}

KvSource LocalKvSource(const KvPool& pool, std::string tcp_address, std::string kv_link) {
  const HostIdentity& local = LocalHostIdentity();
  return KvSource{.hostname = local.hostname,
                  .boot_id = local.boot_id,
                  .shm_name = pool.shm_name(),
                  .tcp_address = std::move(tcp_address),
                  .kv_link = std::move(kv_link)};
}

absl::StatusOr<std::unique_ptr<KvLinkFactory>> MakeKvLinkFactory(
    std::string_view kind, const std::string& host, const std::string& advertise_host) {
  if (kind == "nccl-emulated") return std::make_unique<EmulatedKvLinkFactory>(host, advertise_host);
  if (kind == "nccl") {
#if BATON_HAS_NCCL
    return MakeNcclKvLinkFactory();
#else
    return absl::UnimplementedError("KV links over NCCL: this build has no NCCL (CUDA off)");
#endif
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown KV link kind \"", std::string(kind), "\" (nccl, nccl-emulated)"));
}

AutoKvTransport::AutoKvTransport(HostIdentity local, std::unique_ptr<KvLinkFactory> links,
                                 NcclKvTransportOptions link_options)
    : local_(std::move(local)), tcp_(link_options.secret), link_factory_(std::move(links)) {
  if (link_factory_ != nullptr) {
    nccl_ = std::make_unique<NcclKvTransport>(link_factory_.get(), std::move(link_options));
  }
}

bool IsSameHost(const KvSource& source, const HostIdentity& local) {
  return !source.hostname.empty() && !source.boot_id.empty() && source.hostname == local.hostname &&
         source.boot_id == local.boot_id;
}

std::string_view KvTransportKindName(KvTransportKind kind) {
  switch (kind) {
    case KvTransportKind::kShm:
      return "shm";
    case KvTransportKind::kTcp:
      return "tcp";
  }
  return "unknown";
}

absl::StatusOr<KvTransportKind> AutoKvTransport::Select(const KvSource& source) {
  absl::Status shm_failure = absl::OkStatus();
  if (!source.shm_name.empty() && IsSameHost(source, local_)) {
    absl::StatusOr<std::shared_ptr<const KvPoolMapping>> mapping =
        shm_.LiveMapping(source.shm_name);
    if (mapping.ok()) return KvTransportKind::kShm;
    shm_failure = mapping.status();
  }
  if (!source.tcp_address.empty()) return KvTransportKind::kTcp;
  if (!shm_failure.ok()) return shm_failure;
  return absl::InvalidArgumentError(
      absl::StrCat("KV source (host \"", source.hostname, "\", shm \"", source.shm_name,
                   "\") names no TCP address and no shared-memory segment on this host"));
}

absl::Status AutoKvTransport::Pull(const KvPullSpec& spec, const KvPool& dst,
                                   std::span<const BlockId> dst_blocks, const KvPullWait& wait) {
  if (absl::Status status = ValidatePull(spec, dst, dst_blocks); !status.ok()) return status;
  if (dst.on_device()) {
    if (nccl_ == nullptr) {
      return absl::InvalidArgumentError(
          "KV pull: the destination pool is in device memory and this worker has no KV links");
    }
    return nccl_->Pull(spec, dst, dst_blocks, wait);
  }
  if (absl::Status status = CheckSourceKvLinks(spec, ""); !status.ok()) return status;
  if (spec.resliced()) {
    // Shared memory only if every prefill rank a slab names is reachable through it; otherwise TCP.
    if (dst_blocks.empty()) return absl::OkStatus();
    bool all_shm = true;
    for (const KvSlab& slab : spec.slabs) {
      absl::StatusOr<KvTransportKind> kind = Select(spec.rank_sources[slab.src_rank_idx].source);
      if (!kind.ok()) return kind.status();
      all_shm = all_shm && *kind == KvTransportKind::kShm;
    }
    if (all_shm) return shm_.Pull(spec, dst, dst_blocks, wait);
    return tcp_.Pull(spec, dst, dst_blocks, wait);
  }
  if (spec.src_blocks.empty()) return absl::OkStatus();
  absl::StatusOr<KvTransportKind> kind = Select(spec.source);
  if (!kind.ok()) return kind.status();
  KvTransport& transport = *kind == KvTransportKind::kShm ? static_cast<KvTransport&>(shm_) : tcp_;
  return transport.Pull(spec, dst, dst_blocks, wait);
}

absl::StatusOr<std::unique_ptr<KvTransport>> MakeKvTransport(std::string_view link_kind,
                                                             const std::string& host,
                                                             const std::string& secret,
                                                             int max_idle_links) {
  std::unique_ptr<KvLinkFactory> links;
  if (!link_kind.empty()) {
    absl::StatusOr<std::unique_ptr<KvLinkFactory>> factory = MakeKvLinkFactory(link_kind, host);
    if (!factory.ok()) return factory.status();
    links = *std::move(factory);
  }
  return std::make_unique<AutoKvTransport>(
      LocalHostIdentity(), std::move(links),
      NcclKvTransportOptions{.max_idle_links = max_idle_links, .secret = secret});
}

}  // namespace baton::runtime
