// Blocking-with-deadline I/O on non-blocking TCP sockets, for the KV transports.
//
// Every wait goes through poll() bounded by an IoWait: its deadline (DeadlineExceeded) and optional
// cancel fds (eventfds that a server's Stop() or a pull's caller makes readable: Cancelled). A peer that
// closes or resets the connection gives Unavailable. Sends use MSG_NOSIGNAL, so a closed peer never
// raises SIGPIPE. Socket fds are created non-blocking and close-on-exec.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace baton::runtime {

// Owns a file descriptor; closes it on destruction. Move-only.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) Reset(other.Release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void Reset(int fd = -1);

 private:
  int fd_ = -1;
};

// When to stop waiting on a socket.
struct IoWait {
  absl::Time deadline = absl::InfiniteFuture();
  // Each single wait for progress is also bounded by this: a peer that neither sends nor receives
  // for this long gives DeadlineExceeded even before `deadline`. Default: no extra bound.
  absl::Duration stall_timeout = absl::InfiniteDuration();
  int cancel_fd = -1;  // if >= 0 and readable: give up with Cancelled
  int caller_cancel_fd = -1;  // a second one, the same way (a KV pull's caller's, KvPullWait)
};

// Sends every byte described by `iov` (advanced in place; use a scratch copy). DeadlineExceeded,
// Cancelled, or Unavailable if the peer closed or reset the connection.
absl::Status SendAll(int fd, std::span<iovec> iov, const IoWait& wait);
absl::Status SendAll(int fd, const void* data, size_t num_bytes, const IoWait& wait);

// Receives exactly num_bytes into data. Unavailable if the peer closes first (the message says how
// many bytes had arrived), DeadlineExceeded, Cancelled.
absl::Status RecvAll(int fd, void* data, size_t num_bytes, const IoWait& wait);
// Receives exactly the bytes `iov` describes, in order (a scatter receive: each recvmsg fills as
// many buffers as the socket has bytes for; `iov` is advanced in place). Codes as above.
absl::Status RecvAll(int fd, std::span<iovec> iov, const IoWait& wait);

// Waits until fd is readable or has hung up (the next recv will not block). OK, DeadlineExceeded or
// Cancelled.
absl::Status WaitReadable(int fd, const IoWait& wait);

struct HostPort {
  std::string host;  // name or numeric address, without IPv6 brackets
  int port = 0;
};
// "host:port" or "[v6-address]:port". InvalidArgument if malformed or the port is not in [0,
// 65535].
absl::StatusOr<HostPort> ParseHostPort(const std::string& address);
// The reverse: "host:port", "[v6-address]:port".
std::string FormatHostPort(const std::string& host, int port);
// The host other machines reach a listener bound to `bind_host` at: `bind_host` itself, or this
// machine's name (gethostname) for a wildcard ("", "0.0.0.0", "::").
std::string ReachableHost(const std::string& bind_host);

// Connects to "host:port" (TCP_NODELAY set), trying every resolved address, waiting at most until
// `deadline`. Unavailable if no address accepts (refused, unreachable, name not resolved);
// DeadlineExceeded. Name resolution itself (getaddrinfo) is not bounded by the deadline: use
// numeric addresses or names the resolver answers locally.
absl::StatusOr<UniqueFd> ConnectTcp(const std::string& address, absl::Time deadline);
// The same, waiting as `wait` says (a readable cancel fd gives Cancelled).
absl::StatusOr<UniqueFd> ConnectTcp(const std::string& address, const IoWait& wait);

// A non-blocking listening socket on host:port (port 0 picks a free port; see LocalPort).
// InvalidArgument for a bad host; Unavailable if the address is in use.
absl::StatusOr<UniqueFd> ListenTcp(const std::string& host, int port, int backlog);

// The local port a socket is bound to, or -1.
int LocalPort(int fd);

}  // namespace baton::runtime
