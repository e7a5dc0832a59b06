#include "runtime/transfer/emulated_kv_link.h"

#include <sys/socket.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/process/deployment_secret.h"

namespace baton::runtime {
namespace {

// The id's 128 bytes: magic, port, host length, host, nonce.
constexpr uint64_t kIdMagic = 0x314b4e494c4d4545;  // "EEMLINK1" little-endian
constexpr size_t kNonceBytes = 16;
// How long a connection to a rendezvous may take to say its hello.
constexpr absl::Duration kHelloTimeout = absl::Seconds(2);
constexpr size_t kMaxHostBytes = sizeof(KvLinkId) - 8 - 2 - 1 - kNonceBytes;

struct ParsedId {
  std::string address;  // host:port of the listener
  std::string nonce;    // kNonceBytes
};

KvLinkId EncodeId(const std::string& host, int port, const std::string& nonce) {
  KvLinkId id{};
  uint8_t* p = id.data();
  std::memcpy(p, &kIdMagic, 8);
  const uint16_t port16 = static_cast<uint16_t>(port);
  std::memcpy(p + 8, &port16, 2);
  p[10] = static_cast<uint8_t>(host.size());
  std::memcpy(p + 11, host.data(), host.size());
  std::memcpy(p + 11 + kMaxHostBytes, nonce.data(), kNonceBytes);
  return id;
}

absl::StatusOr<ParsedId> DecodeId(const KvLinkId& id) {
  const uint8_t* p = id.data();
  uint64_t magic = 0;
  std::memcpy(&magic, p, 8);
  if (magic != kIdMagic || p[10] == 0 || p[10] > kMaxHostBytes) {
    return absl::InvalidArgumentError("nccl-emulated link: not an id of the emulated link");
  }
  uint16_t port = 0;
  std::memcpy(&port, p + 8, 2);
  const std::string host(reinterpret_cast<const char*>(p + 11), p[10]);
  const bool v6 = host.find(':') != std::string::npos;
  return ParsedId{
      .address = absl::StrCat(v6 ? "[" : "", host, v6 ? "]" : "", ":", port),
      .nonce = std::string(reinterpret_cast<const char*>(p + 11 + kMaxHostBytes), kNonceBytes)};
}

// What the connecting rank says first: the id's nonce and its rank. The listener answers one byte.
struct Hello {
  char nonce[kNonceBytes];
  int32_t rank;
};
constexpr uint8_t kHelloAccepted = 1;

class EmulatedKvLink final : public KvLink {
 public:
  explicit EmulatedKvLink(UniqueFd fd) : fd_(std::move(fd)) {}

  absl::Status Send(std::span<const KvDeviceSpan> spans, absl::Time deadline) override {
    if (!fd_.valid()) return Broken();
    std::vector<uint64_t> sizes(spans.size());
    std::vector<iovec> iov;
    iov.reserve(2 * spans.size());
    for (size_t i = 0; i < spans.size(); ++i) {
      sizes[i] = spans[i].num_bytes;
      iov.push_back({.iov_base = &sizes[i], .iov_len = sizeof(uint64_t)});
      iov.push_back({.iov_base = spans[i].data, .iov_len = spans[i].num_bytes});
    }
    return Check(SendAll(fd_.get(), std::span<iovec>(iov), IoWait{.deadline = deadline}), "send");
  }

  absl::Status Recv(std::span<const KvDeviceSpan> spans, absl::Time deadline) override {
    if (!fd_.valid()) return Broken();
    const IoWait wait{.deadline = deadline};
    for (size_t i = 0; i < spans.size(); ++i) {
      uint64_t sent = 0;
      if (absl::Status status = Check(RecvAll(fd_.get(), &sent, sizeof(sent), wait), "recv");
          !status.ok()) {
        return status;
      }
      if (sent != spans[i].num_bytes) {
        fd_.Reset();
        return absl::InternalError(absl::StrCat("nccl-emulated link: recv ", i, " of ",
                                                spans[i].num_bytes, " bytes matched a send of ",
                                                sent, " bytes"));
      }
      if (absl::Status status =
              Check(RecvAll(fd_.get(), spans[i].data, spans[i].num_bytes, wait), "recv");
          !status.ok()) {
        return status;
      }
    }
    return absl::OkStatus();
  }

 private:
  // A failed call leaves the stream mid-message: the link is broken, and closing the socket ends
  // the peer's pending call too.
  absl::Status Check(absl::Status status, const char* op) {
    if (status.ok()) return status;
    fd_.Reset();
    return absl::Status(status.code(),
                        absl::StrCat("nccl-emulated link: ", op, ": ", status.message()));
  }
  static absl::Status Broken() {
    return absl::FailedPreconditionError("nccl-emulated link: broken by an earlier failure");
  }

  UniqueFd fd_;  // closed once broken
};

// The listening side: accepts until a connection says the right nonce and the other rank.
absl::StatusOr<UniqueFd> AcceptPeer(const UniqueFd& listener, const std::string& nonce, int rank,
                                    absl::Time deadline) {
  const IoWait wait{.deadline = deadline};
  for (;;) {
    if (absl::Status status = WaitReadable(listener.get(), wait); !status.ok()) {
      return absl::Status(status.code(), absl::StrCat("nccl-emulated link: waiting for the peer "
                                                      "to join: ", status.message()));
    }
    UniqueFd fd(accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) continue;  // EAGAIN, ECONNABORTED: wait again
    // A caller that does not say its hello at once is a stray one: it must not hold up the peer.
    const IoWait hello_wait{.deadline = std::min(deadline, absl::Now() + kHelloTimeout)};
    Hello hello{};
    if (!RecvAll(fd.get(), &hello, sizeof(hello), hello_wait).ok()) continue;
    // The nonce is the link's credential (it reached the peer over the authenticated KV
    // connection): compared in constant time.
    if (!SecretsMatch(nonce, std::string_view(hello.nonce, kNonceBytes))) continue;
    if (hello.rank != 1 - rank) {
      return absl::InvalidArgumentError(absl::StrCat(
          "nccl-emulated link: both sides joined as rank ", rank));
    }
    if (absl::Status status = SendAll(fd.get(), &kHelloAccepted, 1, wait); !status.ok()) {
      return status;
    }
    return fd;
  }
}

absl::StatusOr<UniqueFd> ConnectPeer(const ParsedId& id, int rank, absl::Time deadline) {
  const IoWait wait{.deadline = deadline};
  absl::StatusOr<UniqueFd> fd = ConnectTcp(id.address, wait);
  if (!fd.ok()) {
    return absl::Status(fd.status().code(), absl::StrCat("nccl-emulated link: joining at ",
                                                         id.address, ": ", fd.status().message()));
  }
  Hello hello{};
  std::memcpy(hello.nonce, id.nonce.data(), kNonceBytes);
  hello.rank = rank;
  uint8_t answer = 0;
  absl::Status status = SendAll(fd->get(), &hello, sizeof(hello), wait);
  if (status.ok()) status = RecvAll(fd->get(), &answer, 1, wait);
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("nccl-emulated link: joining at ", id.address,
                                                    ": ", status.message()));
  }
  return std::move(*fd);
}

}  // namespace

absl::StatusOr<KvLinkId> EmulatedKvLinkFactory::NewId() {
  const std::string advertised = advertise_host_.empty() ? ReachableHost(host_) : advertise_host_;
  if (advertised.empty() || advertised.size() > kMaxHostBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl-emulated link: host \"", advertised, "\" does not fit an id"));
  }
  absl::StatusOr<UniqueFd> listener = ListenTcp(host_, 0, /*backlog=*/4);
  if (!listener.ok()) {
    return absl::InternalError(
        absl::StrCat("nccl-emulated link: cannot listen: ", listener.status().message()));
  }
  absl::StatusOr<std::string> random = SecureRandomBytes(kNonceBytes);
  if (!random.ok()) return random.status();
  const std::string& nonce = *random;
  const KvLinkId id = EncodeId(advertised, LocalPort(listener->get()), nonce);
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  std::erase_if(rendezvous_, [now](const auto& entry) {
    return now - entry.second.created > kRendezvousLifetime;
  });
  rendezvous_[nonce] = Rendezvous{.listener = std::move(*listener), .created = now};
  return id;
}

absl::StatusOr<std::unique_ptr<KvLink>> EmulatedKvLinkFactory::Join(const KvLinkId& id, int rank,
                                                                     int device,
                                                                     absl::Time deadline) {
  (void)device;  // one emulated device per process: nothing to select
  if (rank != kKvLinkSenderRank && rank != kKvLinkReceiverRank) {
    return absl::InvalidArgumentError(absl::StrCat("nccl-emulated link: rank ", rank));
  }
  absl::StatusOr<ParsedId> parsed = DecodeId(id);
  if (!parsed.ok()) return parsed.status();
  UniqueFd listener;
  {
    absl::MutexLock lock(&mu_);
    auto it = rendezvous_.find(parsed->nonce);
    if (it != rendezvous_.end()) {
      listener = std::move(it->second.listener);
      rendezvous_.erase(it);
    }
  }
  absl::StatusOr<UniqueFd> fd = listener.valid()
                                    ? AcceptPeer(listener, parsed->nonce, rank, deadline)
                                    : ConnectPeer(*parsed, rank, deadline);
  if (!fd.ok()) return fd.status();
  return std::make_unique<EmulatedKvLink>(std::move(*fd));
}

}  // namespace baton::runtime
