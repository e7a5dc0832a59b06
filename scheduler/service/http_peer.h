// HttpPeer: whether the client of the HTTP request being handled is still connected. httplib 0.11
// gives a handler no way to tell, and a non-streaming completion writes nothing until its end, so a
// client that left would keep its request generating to the last token. The request's connection is
// found among the process's sockets by its two ends (httplib holds it open until the handler
// returns, so the descriptor stays valid), then polled for the client's FIN or reset.
#pragma once

#include <string_view>

namespace baton::scheduler {

class HttpPeer {
 public:
  // The connection whose local port is local_port and whose peer is remote_addr:remote_port (as
  // httplib::Request reports them). Not found (a closed socket, an unexpected address): Gone() is
  // never true.
  static HttpPeer Find(std::string_view remote_addr, int remote_port, int local_port);

  // The client closed its side of the connection, or it broke: nobody will read an answer. A client
  // that only half-closes after sending its request counts as gone too (HTTP clients do not).
  bool Gone() const;

 private:
  explicit HttpPeer(int fd) : fd_(fd) {}
  int fd_;  // -1: not found
};

}  // namespace baton::scheduler
