// HttpServer: the HTTP/1.1 server under the OpenAI API (openai_http.h), event-driven on Boost.Asio
// with Boost.Beast's parser, so that a connection costs a socket and a few kilobytes, not a thread.
// A thread runs only while a complete request is being answered (RequestThreads); reading a request
// and waiting for the next one on a kept-alive connection happen on a few I/O threads.
//
// What a client cannot do to it (each limit in HttpLimits):
//   - hold a connection open by sending slowly: the whole request (headers and body) must arrive
//     within request_timeout of the server starting to wait for it, however it trickles in, or the
//     connection is closed;
//   - send a body past max_body_bytes, whatever its framing: a Content-Length over the limit is
//     answered 413 as soon as the headers are read, a chunked body once its chunks pass the limit;
//     a malformed or negative Content-Length is 400 at once;
//   - open connections without bound: past max_connections_per_peer from one address, or
//     max_connections in all, a new connection is closed at once;
//   - pin a request by not reading its answer: what the server holds for it is bounded (the socket's
//     send buffer and one write; behind it the worker pauses the request, out of its batch), a
//     write the client does not take within write_timeout fails, and a streaming handler hears it
//     from HttpStream::Write (false) and cancels its request;
//   - run more than max_requests_in_flight handlers at once: the next request gets 503.
// The listen backlog is the system's maximum (net.core.somaxconn).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace baton::scheduler {

struct HttpLimits {
  uint64_t max_body_bytes = 4ull << 20;
  uint32_t max_header_bytes = 64u << 10;   // the request line and every header together
  absl::Duration request_timeout = absl::Seconds(10);  // for a whole request to arrive
  // For the client to take one write. Long enough for a slow network; a stalled stream is paused on
  // its worker meanwhile (out of the batch, its KV released to others on demand).
  absl::Duration write_timeout = absl::Seconds(60);
  // The kernel's send buffer of each connection: with one write in flight, the most of an answer
  // the server holds for a client that does not read it.
  int socket_send_buffer_bytes = 32 << 10;  // the kernel doubles it
  size_t max_connections = 16384;
  size_t max_connections_per_peer = 4096;
  size_t max_requests_in_flight = 1024;
};

struct HttpRequest {
  std::string method;
  std::string path;   // percent-decoded, without the query
  std::string query;  // after '?', as sent
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string remote_address;
  int remote_port = 0;
  std::vector<std::string> matches;  // the route pattern's groups; [0] is the whole path

  // The first header of that name (case-insensitive), or "" if none.
  std::string_view Header(std::string_view name) const;
  // The client closed its side of the connection or it broke: nobody will read an answer. For a
  // handler that writes nothing until its end (a streaming one hears it from HttpStream::Write).
  bool ClientGone() const;

  int fd = -1;  // the connection's socket, for ClientGone
};

// The body of a streaming answer, sent in HTTP chunks as it is written.
class HttpStream {
 public:
  virtual ~HttpStream() = default;
  // False once the client is gone or took no bytes for write_timeout; later writes are dropped.
  virtual bool Write(std::string_view data) = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // Set: the answer is status 200 with content_type, its body whatever this writes (chunked).
  std::function<void(HttpStream&)> stream;

  void SetContent(std::string content, std::string type) {
    body = std::move(content);
    content_type = std::move(type);
  }
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponse&)>;

struct HttpRoutes {
  struct Route {
    std::string method;
    std::regex pattern;  // matched against the whole path
    HttpHandler handler;
  };
  std::vector<Route> routes;
  // Runs before routing; returns true when it answered (e.g. a missing API key).
  std::function<bool(const HttpRequest&, HttpResponse&)> before_routing;
  // Fills the answer of an error the server raises itself (400 unparsable, 404 no route, 405 wrong
  // method, 413, 431, 503, and 500 for a handler that threw): status and a message for people.
  std::function<void(int status, std::string_view message, HttpResponse&)> error;

  void Add(std::string method, const std::string& pattern, HttpHandler handler) {
    routes.push_back({std::move(method), std::regex(pattern), std::move(handler)});
  }
};

struct HttpListen {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 picks a free port
  // Both set: HTTPS with this PEM certificate chain and private key.
  std::filesystem::path tls_cert;
  std::filesystem::path tls_key;
  int io_threads = 2;
};

class HttpServer {
 public:
  // Binds and starts serving. Unavailable if it cannot bind, InvalidArgument if the TLS certificate
  // or key cannot be used.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpListen& listen, const HttpLimits& limits,
                                                           HttpRoutes routes);
  // Stops accepting, breaks every connection, waits for the running handlers, joins.
  ~HttpServer();

  int port() const;
  // Connections open now (for tests and metrics).
  size_t num_connections() const;

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace baton::scheduler
