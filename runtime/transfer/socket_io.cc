#include "runtime/transfer/socket_io.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace baton::runtime {
namespace {

int PollTimeoutMs(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return -1;
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<double>(std::ceil(absl::ToDoubleMilliseconds(left)), INT_MAX));
}

// Waits for `events` on fd. OK when they (or an error/hang-up) are pending.
absl::Status Wait(int fd, short events, const IoWait& wait) {
  const absl::Time deadline = std::min(wait.deadline, absl::Now() + wait.stall_timeout);
  for (;;) {
    pollfd fds[3] = {{.fd = fd, .events = events, .revents = 0}};
    nfds_t num_fds = 1;
    for (const int cancel_fd : {wait.cancel_fd, wait.caller_cancel_fd}) {
      if (cancel_fd >= 0) fds[num_fds++] = {.fd = cancel_fd, .events = POLLIN, .revents = 0};
    }
    const int timeout_ms = PollTimeoutMs(deadline);
    const int ready = poll(fds, num_fds, timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("poll: ", std::strerror(errno)));
    }
    for (nfds_t i = 1; i < num_fds; ++i) {
      if (fds[i].revents != 0) return absl::CancelledError("socket wait cancelled");
    }
    if (fds[0].revents != 0) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(deadline == wait.deadline ? "deadline exceeded"
                                                                   : "peer stalled");
    }
  }
}

// Consumes `num_bytes` from iov[*first] onwards, moving *first past the buffers filled up.
void AdvanceIovecs(std::span<iovec> iov, size_t* first, size_t num_bytes) {
  while (num_bytes > 0) {
    iovec& v = iov[*first];
    const size_t step = std::min(num_bytes, v.iov_len);
    v.iov_base = static_cast<char*>(v.iov_base) + step;
    v.iov_len -= step;
    num_bytes -= step;
    if (v.iov_len == 0) ++*first;
  }
}

absl::Status PeerError(const char* op, int err) {
  return absl::UnavailableError(absl::StrCat(op, ": ", std::strerror(err)));
}

struct AddrInfoDeleter {
  void operator()(addrinfo* info) const { freeaddrinfo(info); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

absl::StatusOr<AddrInfoPtr> Resolve(const std::string& host, int port, int flags) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | flags;
  addrinfo* result = nullptr;
  const std::string service = absl::StrCat(port);
  const int rc =
      getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve \"", host, "\": ", gai_strerror(rc)));
  }
  return AddrInfoPtr(result);
}

}  // namespace

void UniqueFd::Reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

absl::Status SendAll(int fd, std::span<iovec> iov, const IoWait& wait) {
  size_t first = 0;
  while (first < iov.size()) {
    if (iov[first].iov_len == 0) {
      ++first;
      continue;
    }
    msghdr msg{};
    msg.msg_iov = &iov[first];
    msg.msg_iovlen = std::min<size_t>(iov.size() - first, IOV_MAX);
    const ssize_t sent = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (absl::Status status = Wait(fd, POLLOUT, wait); !status.ok()) return status;
        continue;
      }
      return PeerError("send", errno);
    }
    AdvanceIovecs(iov, &first, static_cast<size_t>(sent));
  }
  return absl::OkStatus();
}

absl::Status SendAll(int fd, const void* data, size_t num_bytes, const IoWait& wait) {
  iovec iov{.iov_base = const_cast<void*>(data), .iov_len = num_bytes};
  return SendAll(fd, std::span<iovec>(&iov, 1), wait);
}

absl::Status RecvAll(int fd, void* data, size_t num_bytes, const IoWait& wait) {
  iovec iov{.iov_base = data, .iov_len = num_bytes};
  return RecvAll(fd, std::span<iovec>(&iov, 1), wait);
}

absl::Status RecvAll(int fd, std::span<iovec> iov, const IoWait& wait) {
  size_t total = 0;
  for (const iovec& v : iov) total += v.iov_len;
  size_t received = 0;
  size_t first = 0;
  while (received < total) {
    while (iov[first].iov_len == 0) ++first;
    msghdr msg{};
    msg.msg_iov = &iov[first];
    msg.msg_iovlen = std::min<size_t>(iov.size() - first, IOV_MAX);
    const ssize_t n = recvmsg(fd, &msg, 0);
    if (n > 0) {
      received += static_cast<size_t>(n);
      AdvanceIovecs(iov, &first, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {
      return absl::UnavailableError(absl::StrCat("connection closed by the peer after ", received,
                                                 " of ", total, " bytes"));
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (absl::Status status = Wait(fd, POLLIN, wait); !status.ok()) return status;
      continue;
    }
    return PeerError("recv", errno);
  }
  return absl::OkStatus();
}

absl::Status WaitReadable(int fd, const IoWait& wait) { return Wait(fd, POLLIN, wait); }

absl::StatusOr<HostPort> ParseHostPort(const std::string& address) {
  HostPort result;
  absl::string_view port;
  if (!address.empty() && address[0] == '[') {
    const size_t close = address.find("]:");
    if (close == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("address \"", address, "\" is not [v6]:port"));
    }
    result.host = address.substr(1, close - 1);
    port = absl::string_view(address).substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos || address.find(':') != colon) {
      return absl::InvalidArgumentError(absl::StrCat("address \"", address, "\" is not host:port"));
    }
    result.host = address.substr(0, colon);
    port = absl::string_view(address).substr(colon + 1);
  }
  if (result.host.empty() || !absl::SimpleAtoi(port, &result.port) || result.port < 0 ||
      result.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("address \"", address, "\" is not host:port"));
  }
  return result;
}

std::string FormatHostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

std::string ReachableHost(const std::string& bind_host) {
  if (!bind_host.empty() && bind_host != "0.0.0.0" && bind_host != "::" && bind_host != "[::]") {
    return bind_host;
  }
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

absl::StatusOr<UniqueFd> ConnectTcp(const std::string& address, absl::Time deadline) {
  return ConnectTcp(address, IoWait{.deadline = deadline});
}

absl::StatusOr<UniqueFd> ConnectTcp(const std::string& address, const IoWait& wait) {
  absl::StatusOr<HostPort> host_port = ParseHostPort(address);
  if (!host_port.ok()) return host_port.status();
  absl::StatusOr<AddrInfoPtr> addrs = Resolve(host_port->host, host_port->port, 0);
  if (!addrs.ok()) return addrs.status();
  absl::Status last_error = absl::UnavailableError("no address");
  for (const addrinfo* ai = addrs->get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(
        socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last_error = PeerError("socket", errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last_error = PeerError("connect", errno);
        continue;
      }
      if (absl::Status status = Wait(fd.get(), POLLOUT, wait);
          !status.ok()) {
        return absl::Status(status.code(),
                            absl::StrCat("connecting to ", address, ": ", status.message()));
      }
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        last_error = PeerError("connect", err);
        continue;
      }
    }
    return fd;
  }
  return absl::UnavailableError(
      absl::StrCat("cannot connect to ", address, ": ", last_error.message()));
}

absl::StatusOr<UniqueFd> ListenTcp(const std::string& host, int port, int backlog) {
  absl::StatusOr<AddrInfoPtr> addrs = Resolve(host, port, AI_PASSIVE);
  if (!addrs.ok()) return absl::InvalidArgumentError(addrs.status().message());
  absl::Status last_error = absl::UnavailableError("no address");
  for (const addrinfo* ai = addrs->get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(
        socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last_error = PeerError("socket", errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd.get(), backlog) != 0) {
      last_error = PeerError("bind/listen", errno);
      continue;
    }
    return fd;
  }
  return absl::UnavailableError(
      absl::StrCat("cannot listen on ", host, ":", port, ": ", last_error.message()));
}

int LocalPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.ss_family == AF_INET)
    return ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  }
  return -1;
}

}  // namespace baton::runtime
