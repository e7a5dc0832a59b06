#include "scheduler/service/http_peer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <charconv>
#include <filesystem>
#include <string>
#include <system_error>

namespace baton::scheduler {
namespace {

// "address", port of a socket's end; false for anything but IPv4 and IPv6.
bool Endpoint(const sockaddr_storage& addr, std::string* address, int* port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &in.sin_addr, text, sizeof(text));
    *port = ntohs(in.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(addr);
    inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof(text));
    *port = ntohs(in6.sin6_port);
  } else {
    return false;
  }
  *address = text;
  return true;
}

bool IsConnection(int fd, std::string_view remote_addr, int remote_port, int local_port) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  std::string address;
  int port = 0;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      !Endpoint(addr, &address, &port) || port != local_port) {
    return false;
  }
  len = sizeof(addr);
  return getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
         Endpoint(addr, &address, &port) && port == remote_port && address == remote_addr;
}

}  // namespace

HttpPeer HttpPeer::Find(std::string_view remote_addr, int remote_port, int local_port) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", error)) {
    const std::string name = entry.path().filename().string();
    int fd = -1;
    if (std::from_chars(name.data(), name.data() + name.size(), fd).ec != std::errc()) continue;
    if (IsConnection(fd, remote_addr, remote_port, local_port)) return HttpPeer(fd);
  }
  return HttpPeer(-1);
}

bool HttpPeer::Gone() const {
  if (fd_ < 0) return false;
  pollfd p{.fd = fd_, .events = POLLRDHUP, .revents = 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace baton::scheduler
