#include "scheduler/service/http_server.h"

#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <map>
#include <optional>
#include <thread>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "kernels/common/log.h"
#include "runtime/tokenizer/absl_compat.h"
#include "scheduler/service/http_request_threads.h"

namespace baton::scheduler {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

std::chrono::steady_clock::duration ToChrono(absl::Duration d) { return absl::ToChronoNanoseconds(d); }

// The most a listen(2) backlog can be here: the kernel silently caps larger ones at this.
int SystemListenBacklog() {
  std::ifstream file("/proc/sys/net/core/somaxconn");
  int value = 0;
  if (file >> value && value > 0) return value;
  return SOMAXCONN;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = absl::ascii_tolower(c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::string_view View(beast::string_view text) { return {text.data(), text.size()}; }

bool SameIgnoringCase(std::string_view a, std::string_view b) {
  return absl::EqualsIgnoreCase(absl::string_view(a.data(), a.size()), absl::string_view(b.data(), b.size()));
}

std::string PercentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      const int hi = HexDigit(text[i + 1]), lo = HexDigit(text[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

}  // namespace

std::string_view HttpRequest::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (SameIgnoringCase(key, name)) return value;
  }
  return {};
}

bool HttpRequest::ClientGone() const {
  if (fd < 0) return false;
  pollfd p{.fd = fd, .events = POLLRDHUP, .revents = 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

// A connection as the server tracks it: something it can break at shutdown.
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual void Break() = 0;
};

class HttpServer::Impl {
 public:
  Impl(const HttpLimits& limits, HttpRoutes routes)
      : limits(limits), routes(std::move(routes)), request_threads(limits.max_requests_in_flight) {}

  const HttpLimits limits;
  const HttpRoutes routes;

  // Before io_context: sessions that die with it still count themselves out here.
  absl::Mutex mu;
  size_t num_connections ABSL_GUARDED_BY(mu) = 0;
  absl::flat_hash_map<std::string, size_t> connections_per_peer ABSL_GUARDED_BY(mu);
  std::map<uint64_t, std::weak_ptr<SessionBase>> sessions ABSL_GUARDED_BY(mu);
  uint64_t next_session_id ABSL_GUARDED_BY(mu) = 0;
  absl::Time last_refusal_logged ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  std::atomic<size_t> requests_in_flight = 0;
  std::atomic<bool> stopping = false;
  std::optional<asio::ssl::context> tls;

  asio::io_context io{};
  std::optional<tcp::acceptor> acceptor;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> keep_running;
  std::vector<std::thread> io_threads;
  int port = 0;

  RequestThreads request_threads;

  void Accept();
  void OnAccept(beast::error_code ec, tcp::socket socket);
  // Counts a new connection in, or says why it is refused.
  std::optional<std::string> Admit(const std::string& peer) ABSL_LOCKS_EXCLUDED(mu);
  void Release(const std::string& peer, uint64_t id) ABSL_LOCKS_EXCLUDED(mu);
  void Stop();
};

namespace {

template <bool kTls>
using StreamOf = std::conditional_t<kTls, beast::ssl_stream<beast::tcp_stream>, beast::tcp_stream>;

template <bool kTls>
class Session final : public SessionBase, public std::enable_shared_from_this<Session<kTls>> {
 public:
  using Stream = StreamOf<kTls>;

  Session(HttpServer::Impl* server, Stream stream, std::string peer, int peer_port, uint64_t id)
      : server_(server), stream_(std::move(stream)), peer_(std::move(peer)), peer_port_(peer_port), id_(id) {}
  ~Session() override { server_->Release(peer_, id_); }

  void Start() {
    if constexpr (kTls) {
      Lowest().expires_after(ToChrono(server_->limits.request_timeout));
      stream_.async_handshake(asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) return self->Close();
                                self->ReadHeader();
                              });
    } else {
      ReadHeader();
    }
  }

  // Shuts the socket both ways (pending operations end, ClientGone turns true) but keeps the
  // descriptor until the session ends, so that no handler polls a reused one.
  void Break() override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] {
      beast::error_code ignored;
      self->Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    });
  }

 private:
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  // The whole request, headers and body, must arrive within request_timeout from here: one deadline,
  // not one per read, so that a byte every few seconds does not keep a connection.
  void ReadHeader() {
    if (server_->stopping) return Close();
    parser_.emplace();
    parser_->header_limit(server_->limits.max_header_bytes);
    parser_->body_limit(server_->limits.max_body_bytes);
    Lowest().expires_after(ToChrono(server_->limits.request_timeout));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](beast::error_code ec, size_t) {
                              self->OnHeader(ec);
                            });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    if (SameIgnoringCase(View(parser_->get()[http::field::expect]), "100-continue")) {
      // curl and others wait (a second) for this before sending a body.
      auto interim = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      http::async_write(stream_, *interim,
                        [self = this->shared_from_this(), interim](beast::error_code ec, size_t) {
                          if (ec) return self->Close();
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnBody(ec); });
  }

  void OnReadError(beast::error_code ec) {
    const HttpLimits& limits = server_->limits;
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == asio::error::operation_aborted || ec == asio::ssl::error::stream_truncated) {
      return Close();
    }
    // The deadline passed (tcp_stream has closed the socket: nothing can be answered), or the
    // client closed.
    if (ec == beast::error::timeout) return Close();
    if (ec == http::error::body_limit) {
      return ReplyError(413, absl::StrCat("the request body is larger than the limit of ",
                                          limits.max_body_bytes, " bytes"));
    }
    if (ec == http::error::header_limit) {
      return ReplyError(431, absl::StrCat("the request line and headers are larger than the limit of ",
                                          limits.max_header_bytes, " bytes"));
    }
    if (ec == http::error::bad_content_length) return ReplyError(400, "the Content-Length is not valid");
    if (ec == http::error::partial_message) return Close();  // the client left mid-request
    ReplyError(400, absl::StrCat("the request is not valid HTTP (", ec.message(), ")"));
  }

  void OnBody(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    Lowest().expires_never();
    http::request<http::string_body> message = parser_->release();
    parser_.reset();
    HttpRequest request;
    request.method = std::string(View(message.method_string()));
    const std::string_view target = View(message.target());
    const size_t question = target.find('?');
    request.path = PercentDecode(target.substr(0, question));
    if (question != std::string_view::npos) request.query = std::string(target.substr(question + 1));
    for (const auto& field : message) {
      request.headers.emplace_back(View(field.name_string()), View(field.value()));
    }
    request.body = std::move(message.body());
    request.remote_address = peer_;
    request.remote_port = peer_port_;
    request.fd = Lowest().socket().native_handle();
    keep_alive_ = message.keep_alive();
    if (server_->requests_in_flight.fetch_add(1) >= server_->limits.max_requests_in_flight) {
      --server_->requests_in_flight;
      return ReplyError(503, absl::StrCat("the server is answering ", server_->limits.max_requests_in_flight,
                                          " requests, the most it takes at once; try again"),
                        /*close=*/false);
    }
    server_->request_threads.Enqueue([self = this->shared_from_this(), request = std::move(request)]() mutable {
      self->Answer(std::move(request));
      --self->server_->requests_in_flight;
    });
  }

  // An error the server raises itself, answered from the I/O thread; the connection is then closed
  // (its input may be anything) unless close is false.
  void ReplyError(int status, std::string_view message, bool close = true) {
    LogAccess("-", "-", status, absl::Now());
    HttpResponse response;
    server_->routes.error(status, message, response);
    auto out = std::make_shared<http::response<http::string_body>>(Head(response, !close));
    Lowest().expires_after(ToChrono(server_->limits.write_timeout));
    http::async_write(stream_, *out, [self = this->shared_from_this(), out, close](beast::error_code ec, size_t) {
      if (ec || close) return self->DrainAndClose();
      self->ReadHeader();
    });
  }

  http::response<http::string_body> Head(HttpResponse& response, bool keep_alive) {
    http::response<http::string_body> out{static_cast<http::status>(response.status), 11};
    if (!response.content_type.empty()) out.set(http::field::content_type, response.content_type);
    for (const auto& [name, value] : response.headers) out.set(name, value);
    out.keep_alive(keep_alive);
    out.body() = std::move(response.body);
    out.prepare_payload();
    return out;
  }

  // The access log: one line per answer at info level, errors the server raises included (what
  // uvicorn prints for vLLM), as key=value pairs like the request log's.
  void LogAccess(std::string_view method, std::string_view path, int status, absl::Time start) const {
    if (!LogEnabled(LogLevel::kInfo)) return;
    LogInfo(absl::StrFormat("http peer=%s:%d method=%s path=%s status=%d ms=%.3f", peer_, peer_port_,
                            LogValue(runtime::ToAbsl(method)), LogValue(runtime::ToAbsl(path)), status,
                            absl::ToDoubleMilliseconds(absl::Now() - start)));
  }

  // Runs on a request thread: the handler, then its answer written through the I/O thread.
  void Answer(HttpRequest request) {
    const absl::Time start = absl::Now();
    HttpResponse response;
    Route(request, response);
    const int status = response.status;
    const bool keep_alive = keep_alive_ && !server_->stopping;
    bool ok;
    if (!response.stream) {
      http::response<http::string_body> out = Head(response, keep_alive);
      ok = !WriteAndWait([&](auto done) { http::async_write(stream_, out, std::move(done)); });
    } else {
      ok = WriteStreamed(response, keep_alive);
    }
    LogAccess(request.method, request.path, status, start);
    asio::post(stream_.get_executor(), [self = this->shared_from_this(), next = ok && keep_alive] {
      if (next) return self->ReadHeader();
      self->Close();
    });
  }

  void Route(HttpRequest& request, HttpResponse& response) {
    const HttpRoutes& routes = server_->routes;
    try {
      if (routes.before_routing && routes.before_routing(request, response)) return;
      bool path_known = false;
      for (const HttpRoutes::Route& route : routes.routes) {
        std::smatch match;
        if (!std::regex_match(request.path, match, route.pattern)) continue;
        path_known = true;
        if (route.method != request.method) continue;
        request.matches.assign(match.begin(), match.end());
        route.handler(request, response);
        return;
      }
      if (path_known) {
        routes.error(405, absl::StrCat(request.method, " is not allowed on ", request.path), response);
      } else {
        routes.error(404, absl::StrCat("no route for ", request.method, " ", request.path), response);
      }
    } catch (...) {
      // No exception text leaves the process: it names internals, not what the client did wrong.
      response = HttpResponse{};
      routes.error(500, "internal error", response);
    }
  }

  class ChunkWriter final : public HttpStream {
   public:
    explicit ChunkWriter(Session* session) : session_(session) {}
    bool Write(std::string_view data) override {
      if (failed_) return false;
      if (data.empty()) return true;
      failed_ = session_->WriteAndWait([&](auto done) {
        asio::async_write(session_->stream_, http::make_chunk(asio::const_buffer(data.data(), data.size())),
                          std::move(done));
      });
      return !failed_;
    }
    bool failed() const { return failed_; }

   private:
    Session* session_;
    bool failed_ = false;
  };

  bool WriteStreamed(HttpResponse& response, bool keep_alive) {
    http::response<http::empty_body> head{http::status::ok, 11};
    head.set(http::field::content_type, response.content_type);
    for (const auto& [name, value] : response.headers) head.set(name, value);
    head.keep_alive(keep_alive);
    head.chunked(true);
    http::response_serializer<http::empty_body> serializer{head};
    if (WriteAndWait([&](auto done) { http::async_write_header(stream_, serializer, std::move(done)); })) {
      return false;
    }
    ChunkWriter writer(this);
    try {
      response.stream(writer);
    } catch (...) {
      return false;  // the body is cut short: the client sees no last chunk
    }
    if (writer.failed()) return false;
    return !WriteAndWait([&](auto done) { asio::async_write(stream_, http::make_chunk_last(), std::move(done)); });
  }

  // Starts one write on the I/O thread, under write_timeout, and waits for it. True on failure.
  template <class StartWrite>
  bool WriteAndWait(StartWrite start) {
    std::promise<beast::error_code> finished;
    std::future<beast::error_code> result = finished.get_future();
    asio::post(stream_.get_executor(), [&] {
      Lowest().expires_after(ToChrono(server_->limits.write_timeout));
      start([&finished](beast::error_code ec, size_t) { finished.set_value(ec); });
    });
    const beast::error_code ec = result.get();  // the write's own deadline ends it
    if (ec == beast::error::timeout) {
      LogWarning(absl::StrCat("HTTP client ", peer_, ":", peer_port_, " took none of the answer for ",
                              absl::FormatDuration(server_->limits.write_timeout),
                              "; its request is cancelled and the connection closed"));
    }
    return static_cast<bool>(ec);
  }

  // After an error answer: stop sending, read (and drop) what the client is still sending for a
  // moment so that closing does not reset the connection before it has read the answer.
  void DrainAndClose() {
    beast::error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
    Lowest().expires_after(std::chrono::seconds(1));
    Drain();
  }
  void Drain() {
    auto sink = std::make_shared<std::array<char, 16384>>();
    Lowest().async_read_some(asio::buffer(*sink),
                             [self = this->shared_from_this(), sink](beast::error_code ec, size_t) {
                               if (ec) return self->Close();
                               self->Drain();
                             });
  }

  void Close() {
    beast::error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close();
  }

  HttpServer::Impl* server_;
  Stream stream_;
  const std::string peer_;
  const int peer_port_;
  const uint64_t id_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool keep_alive_ = false;
};

}  // namespace

std::optional<std::string> HttpServer::Impl::Admit(const std::string& peer) {
  absl::MutexLock lock(&mu);
  if (stopping) return "the server is stopping";
  if (num_connections >= limits.max_connections) {
    return absl::StrCat("the server has ", num_connections, " connections open, its limit");
  }
  size_t& from_peer = connections_per_peer[peer];
  if (from_peer >= limits.max_connections_per_peer) {
    return absl::StrCat(peer, " has ", from_peer, " connections open, the limit per client");
  }
  ++from_peer;
  ++num_connections;
  return std::nullopt;
}

void HttpServer::Impl::Release(const std::string& peer, uint64_t id) {
  absl::MutexLock lock(&mu);
  --num_connections;
  auto it = connections_per_peer.find(peer);
  if (it != connections_per_peer.end() && --it->second == 0) connections_per_peer.erase(it);
  sessions.erase(id);
}

void HttpServer::Impl::Accept() {
  acceptor->async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
    OnAccept(ec, std::move(socket));
  });
}

void HttpServer::Impl::OnAccept(beast::error_code ec, tcp::socket socket) {
  if (ec == asio::error::operation_aborted || !acceptor->is_open()) return;  // stopping
  if (ec) {
    // Out of descriptors (EMFILE) and the like: try again shortly instead of spinning.
    auto timer = std::make_shared<asio::steady_timer>(acceptor->get_executor(), std::chrono::milliseconds(50));
    timer->async_wait([this, timer](beast::error_code) {
      if (acceptor->is_open()) Accept();
    });
    return;
  }
  beast::error_code endpoint_error;
  const tcp::endpoint remote = socket.remote_endpoint(endpoint_error);
  const std::string peer = endpoint_error ? std::string("?") : remote.address().to_string();
  if (std::optional<std::string> refusal = Admit(peer); refusal.has_value()) {
    socket.close(endpoint_error);
    absl::MutexLock lock(&mu);
    if (absl::Now() - last_refusal_logged > absl::Seconds(10)) {
      last_refusal_logged = absl::Now();
      LogWarning(absl::StrCat("HTTP: refused connections from ", peer, ": ", *refusal));
    }
    return Accept();
  }
  std::shared_ptr<SessionBase> session;
  uint64_t id;
  {
    absl::MutexLock lock(&mu);
    id = next_session_id++;
  }
  const int peer_port = endpoint_error ? 0 : remote.port();
  socket.set_option(asio::socket_base::send_buffer_size(limits.socket_send_buffer_bytes), endpoint_error);
  if (tls.has_value()) {
    auto s = std::make_shared<Session<true>>(this, StreamOf<true>(beast::tcp_stream(std::move(socket)), *tls),
                                             peer, peer_port, id);
    session = s;
    {
      absl::MutexLock lock(&mu);
      sessions[id] = session;
    }
    s->Start();
  } else {
    auto s = std::make_shared<Session<false>>(this, StreamOf<false>(std::move(socket)), peer, peer_port, id);
    session = s;
    {
      absl::MutexLock lock(&mu);
      sessions[id] = session;
    }
    s->Start();
  }
  Accept();
}

void HttpServer::Impl::Stop() {
  stopping = true;
  std::promise<void> closed;
  asio::post(acceptor->get_executor(), [&] {
    beast::error_code ignored;
    acceptor->close(ignored);
    closed.set_value();
  });
  closed.get_future().wait();
  std::vector<std::shared_ptr<SessionBase>> open;
  {
    absl::MutexLock lock(&mu);
    for (auto& [id, weak] : sessions) {
      if (std::shared_ptr<SessionBase> session = weak.lock()) open.push_back(std::move(session));
    }
  }
  for (const std::shared_ptr<SessionBase>& session : open) session->Break();
  open.clear();
  request_threads.Shutdown();  // handlers end: their client is gone
  keep_running.reset();
  io.stop();
  for (std::thread& thread : io_threads) thread.join();
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { impl_->Stop(); }

int HttpServer::port() const { return impl_->port; }

size_t HttpServer::num_connections() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->num_connections;
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpListen& listen, const HttpLimits& limits,
                                                              HttpRoutes routes) {
  auto impl = std::make_unique<Impl>(limits, std::move(routes));
  if (!listen.tls_cert.empty() || !listen.tls_key.empty()) {
    impl->tls.emplace(asio::ssl::context::tls_server);
    asio::ssl::context& tls = *impl->tls;
    tls.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                    asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
    beast::error_code ec;
    tls.use_certificate_chain_file(listen.tls_cert.string(), ec);
    if (!ec) tls.use_private_key_file(listen.tls_key.string(), asio::ssl::context::pem, ec);
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat("OpenAI HTTP: cannot use the TLS certificate ",
                                                     listen.tls_cert.string(), " with the key ",
                                                     listen.tls_key.string(), ": ", ec.message()));
    }
  }
  const std::string where = absl::StrCat(listen.host, ":", listen.port);
  beast::error_code ec;
  tcp::resolver resolver(impl->io);
  const auto endpoints = resolver.resolve(listen.host, std::to_string(listen.port),
                                          tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty()) {
    return absl::UnavailableError(absl::StrCat("OpenAI HTTP: cannot resolve ", where, ": ", ec.message()));
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  impl->acceptor.emplace(asio::make_strand(impl->io));
  tcp::acceptor& acceptor = *impl->acceptor;
  // SO_REUSEADDR allows a restart while old connections linger; no SO_REUSEPORT, which would let a
  // second deployment on the same port take half the traffic.
  if (acceptor.open(endpoint.protocol(), ec); !ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(SystemListenBacklog(), ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("OpenAI HTTP: cannot listen on ", where, " (is the port in use?): ", ec.message()));
  }
  impl->port = acceptor.local_endpoint().port();
  impl->keep_running.emplace(impl->io.get_executor());
  impl->Accept();
  for (int i = 0; i < std::max(1, listen.io_threads); ++i) {
    impl->io_threads.emplace_back([io = &impl->io] { io->run(); });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

}  // namespace baton::scheduler
