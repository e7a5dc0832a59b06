#include "runtime/transfer/kv_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/process/deployment_secret.h"
#include "runtime/transfer/kv_dtype.h"
#include "runtime/transfer/kv_slab_copy.h"
#include "runtime/transfer/kv_transport.h"

namespace baton::runtime {

static_assert(sizeof(KvWireRequest::grant) == KvGrants::kTokenBytes);
namespace {

KvWireResponse OkResponse(uint64_t payload_bytes) {
  return KvWireResponse{.magic = kKvWireMagic,
                        .status_code = 0,
                        .message_bytes = 0,
                        .reserved = 0,
                        .payload_bytes = payload_bytes};
}

}  // namespace

absl::StatusOr<std::unique_ptr<KvServer>> KvServer::Start(const KvPool& pool,
                                                          const KvServerOptions& options) {
  absl::StatusOr<UniqueFd> listen_fd = ListenTcp(options.host, options.port, /*backlog=*/128);
  if (!listen_fd.ok()) return listen_fd.status();
  UniqueFd stop_fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!stop_fd.valid()) {
    return absl::InternalError(absl::StrCat("KV server: eventfd: ", std::strerror(errno)));
  }
  const int port = LocalPort(listen_fd->get());
  std::unique_ptr<KvServer> server(
      new KvServer(pool, options, std::move(*listen_fd), std::move(stop_fd), port));
  try {
    server->listener_ = std::thread([raw = server.get()] { raw->AcceptLoop(); });
  } catch (const std::system_error& e) {
    server->stopped_ = true;
    return absl::InternalError(absl::StrCat("KV server: cannot start a thread: ", e.what()));
  }
  return server;
}

KvServer::~KvServer() { Stop(); }

void KvServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  const uint64_t one = 1;
  // The eventfd stays readable from now on: every poll of every server thread wakes up.
  [[maybe_unused]] const ssize_t written = write(stop_fd_.get(), &one, sizeof(one));
  if (listener_.joinable()) listener_.join();
  for (auto& connection : connections_) connection->thread.join();
  connections_.clear();
  listen_fd_.Reset();
}

std::string KvServer::address() const {
  return FormatHostPort(
      options_.advertise_host.empty() ? ReachableHost(options_.host) : options_.advertise_host, port_);
}

void KvServer::ReapFinishedConnections() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if ((*it)->done.load()) {
      (*it)->thread.join();
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

void KvServer::AcceptLoop() {
  for (;;) {
    if (!WaitReadable(listen_fd_.get(), IoWait{.cancel_fd = stop_fd_.get()}).ok()) return;
    UniqueFd fd(accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: back off instead of spinning on a listen fd that stays readable.
        WaitReadable(stop_fd_.get(), IoWait{.deadline = absl::Now() + absl::Milliseconds(10)})
            .IgnoreError();
      }
      continue;  // EAGAIN, EINTR, ECONNABORTED: the next wait sorts it out
    }
    ReapFinishedConnections();
    EvictOldestAwaitingHello();
    const int one = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto connection = std::make_unique<Connection>();
    connection->fd = std::move(fd);
    Connection* raw = connection.get();
    try {
      connection->thread = std::thread([this, raw] {
        ServeConnection(*raw);
        // The peer sees the end now; the descriptor itself is closed when the listener reaps this.
        shutdown(raw->fd.get(), SHUT_RDWR);
        raw->done.store(true);
      });
    } catch (const std::system_error&) {
      continue;  // no thread: the connection is closed and the client retries
    }
    connections_.push_back(std::move(connection));
  }
}

void KvServer::EvictOldestAwaitingHello() {
  int awaiting = 0;
  Connection* oldest = nullptr;  // connections_ is in accept order
  for (const auto& connection : connections_) {
    if (connection->state.load() != kAwaitingHello || connection->done.load()) continue;
    if (oldest == nullptr) oldest = connection.get();
    ++awaiting;
  }
  if (awaiting < options_.max_unauthenticated_connections || oldest == nullptr) return;
  int expected = kAwaitingHello;
  // Its thread is still reading the hello (it cannot authenticate now): the shutdown ends that read.
  if (oldest->state.compare_exchange_strong(expected, kEvicted)) shutdown(oldest->fd.get(), SHUT_RDWR);
}

absl::Status KvServer::ReadHello(int fd) {
  // The whole hello within hello_timeout of the connection: it is sent with the connection.
  const IoWait wait{.deadline = absl::Now() + options_.hello_timeout, .cancel_fd = stop_fd_.get()};
  KvWireHello hello{};
  if (absl::Status status = RecvAll(fd, &hello, sizeof(hello), wait); !status.ok()) return status;
  if (hello.magic != kKvWireMagic || hello.version != kKvWireVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV server: bad hello magic/version (expected version ", kKvWireVersion, ")"));
  }
  if (hello.secret_bytes > kKvWireMaxSecretBytes) {
    return absl::InvalidArgumentError(absl::StrCat("KV server: a secret of ", hello.secret_bytes, " bytes"));
  }
  std::string secret(hello.secret_bytes, '\0');
  if (absl::Status status = RecvAll(fd, secret.data(), secret.size(), wait); !status.ok()) return status;
  if (!options_.secret.empty() && !SecretsMatch(options_.secret, secret)) {
    return absl::UnauthenticatedError("KV server: missing or wrong deployment secret");
  }
  return absl::OkStatus();
}

void KvServer::ServeConnection(Connection& connection) {
  const UniqueFd& fd = connection.fd;
  absl::Status hello = ReadHello(fd.get());
  int expected = kAwaitingHello;
  if (hello.ok() && !connection.state.compare_exchange_strong(expected, kAuthenticated)) {
    hello = absl::UnavailableError("KV server: evicted before its hello");  // too many were waiting
  }
  if (hello.ok() && num_authenticated_.fetch_add(1) >= options_.max_connections) {
    num_authenticated_.fetch_sub(1);
    // Closed unanswered, as a connection the server cannot take: the client sees Unavailable.
    hello = absl::UnavailableError(absl::StrCat("KV server: ", options_.max_connections, " connections open"));
  }
  if (!hello.ok()) {
    // Answered to the first request the client sends (it sends the hello and that request without
    // waiting): nothing of the pool is read for it.
    if (!absl::IsUnavailable(hello) && !absl::IsDeadlineExceeded(hello) && !absl::IsCancelled(hello) &&
        connection.state.load() != kEvicted &&
        SendStatus(fd.get(), hello)) {
      // Close gracefully: the client's request may still be arriving, and closing a socket with
      // unread bytes resets it, which can destroy the answer before the client reads it. So stop
      // sending, then drop what comes in (a bounded amount, for a bounded time) until the client
      // closes its end.
      shutdown(fd.get(), SHUT_WR);
      const IoWait linger{.deadline = absl::Now() + absl::Seconds(1), .cancel_fd = stop_fd_.get()};
      char sink[4096];
      for (size_t dropped = 0; dropped < (size_t{1} << 20) && WaitReadable(fd.get(), linger).ok();) {
        const ssize_t n = recv(fd.get(), sink, sizeof(sink), 0);
        if (n <= 0) break;
        dropped += static_cast<size_t>(n);
      }
    }
    return;
  }
  std::unique_ptr<KvLink> link;  // the link this connection joined, if any; ends with it
  for (;;) {
    const IoWait idle{.deadline = absl::Now() + options_.io_timeout, .cancel_fd = stop_fd_.get()};
    if (!WaitReadable(fd.get(), idle).ok()) break;
    KvWireRequest request{};
    const IoWait wait{.stall_timeout = options_.io_timeout, .cancel_fd = stop_fd_.get()};
    if (!RecvAll(fd.get(), &request, sizeof(request), wait).ok()) break;  // includes a clean close
    if (!ServeRequest(fd.get(), request, link)) break;
  }
  if (link != nullptr) num_live_links_.fetch_sub(1);
  num_authenticated_.fetch_sub(1);
}

bool KvServer::SendStatus(int fd, const absl::Status& status) {
  const std::string message(status.message());
  KvWireResponse response{.magic = kKvWireMagic,
                          .status_code = static_cast<int32_t>(status.code()),
                          .message_bytes = static_cast<uint32_t>(message.size()),
                          .reserved = 0,
                          .payload_bytes = 0};
  iovec iov[2] = {{.iov_base = &response, .iov_len = sizeof(response)},
                  {.iov_base = const_cast<char*>(message.data()), .iov_len = message.size()}};
  const IoWait wait{.stall_timeout = options_.io_timeout, .cancel_fd = stop_fd_.get()};
  return SendAll(fd, std::span<iovec>(iov, 2), wait).ok();
}

bool KvServer::ServeRequest(int fd, const KvWireRequest& request, std::unique_ptr<KvLink>& link) {
  if (request.magic != kKvWireMagic || request.version != kKvWireVersion) {
    SendStatus(fd,
              absl::InvalidArgumentError(absl::StrCat(
                  "KV server: bad request magic/version (expected version ", kKvWireVersion, ")")));
    return false;  // the framing cannot be trusted any more
  }
  if (request.num_pieces > kKvWireMaxPieces ||
      (request.kind == kKvWireJoinLink && request.num_pieces != 0)) {
    SendStatus(fd, absl::InvalidArgumentError(
                      absl::StrCat("KV server: ", request.num_pieces, " pieces in one request")));
    return false;  // the pieces that follow are not read
  }
  switch (request.kind) {
    case kKvWireInline:
      return ServePieces(fd, request);
    case kKvWireJoinLink:
      return JoinLink(fd, request, link);
    case kKvWireOverLink:
      return SendOverLink(fd, request, link.get());
    default:
      SendStatus(fd, absl::InvalidArgumentError(
                        absl::StrCat("KV server: unknown request kind ", request.kind)));
      return false;  // what follows the header is unknown
  }
}

absl::Status KvServer::CheckShape(const KvWireRequest& request) const {
  const KvPoolShape& shape = pool_.shape();
  const std::optional<DType> dtype = KvDTypeFromCode(request.dtype);
  if (!dtype.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV server: the request expects a pool of unknown KV element type ", request.dtype,
        " but this pool is (", ShapeString(shape), ")"));
  }
  const KvPoolShape expected{.num_layers = request.num_layers,
                             .num_kv_heads = request.num_kv_heads,
                             .head_dim = request.head_dim,
                             .block_size = request.block_size,
                             .dtype = *dtype};
  if (expected == shape) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("KV server: the request expects a pool of shape (",
                                                 ShapeString(expected), ") but this pool is (",
                                                 ShapeString(shape), ")"));
}

bool KvServer::JoinLink(int fd, const KvWireRequest& request, std::unique_ptr<KvLink>& link) {
  if (options_.link_factory == nullptr) {
    return SendStatus(fd, absl::FailedPreconditionError(
                              "KV server: this pool is in host memory; pull it inline, not over a "
                              "KV link"));
  }
  if (absl::Status status = CheckShape(request); !status.ok()) return SendStatus(fd, status);
  // A second join on one connection replaces the first link (and keeps its slot).
  if (link == nullptr && num_live_links_.fetch_add(1) >= options_.max_links) {
    num_live_links_.fetch_sub(1);
    return SendStatus(fd, absl::ResourceExhaustedError(absl::StrCat(
                              "KV server: ", options_.max_links, " KV links open already")));
  }
  link.reset();
  absl::StatusOr<KvLinkId> id = options_.link_factory->NewId();
  if (!id.ok()) {
    num_live_links_.fetch_sub(1);
    return SendStatus(fd, id.status());
  }
  KvWireResponse response = OkResponse(id->size());
  iovec iov[2] = {{.iov_base = &response, .iov_len = sizeof(response)},
                  {.iov_base = id->data(), .iov_len = id->size()}};
  const IoWait wait{.stall_timeout = options_.io_timeout, .cancel_fd = stop_fd_.get()};
  absl::StatusOr<std::unique_ptr<KvLink>> joined =
      SendAll(fd, std::span<iovec>(iov, 2), wait).ok()
          ? options_.link_factory->Join(*id, kKvLinkSenderRank, pool_.device_ordinal(),
                                        absl::Now() + options_.io_timeout)
          : absl::UnavailableError("the client left");
  if (!joined.ok()) {
    num_live_links_.fetch_sub(1);
    return false;  // the client's join fails with the connection
  }
  link = *std::move(joined);
  num_links_joined_.fetch_add(1);
  return true;
}

bool KvServer::SendOverLink(int fd, const KvWireRequest& request, KvLink* link) {
  std::vector<KvWireRange> ranges(request.num_pieces);
  const IoWait wait{.stall_timeout = options_.io_timeout, .cancel_fd = stop_fd_.get()};
  if (!RecvAll(fd, ranges.data(), ranges.size() * sizeof(KvWireRange), wait).ok()) return false;
  if (link == nullptr) {
    return SendStatus(fd, absl::FailedPreconditionError(
                             "KV server: no KV link joined on this connection"));
  }
  if (absl::Status status = CheckShape(request); !status.ok()) return SendStatus(fd, status);
  const int64_t pool_bytes = static_cast<int64_t>(pool_.BlockBytes()) * pool_.num_blocks();
  const int64_t block_bytes = static_cast<int64_t>(pool_.BlockBytes());
  std::vector<KvDeviceSpan> spans;
  std::vector<BlockSpan> blocks;  // what each range reads, for the grant check
  spans.reserve(ranges.size());
  blocks.reserve(ranges.size());
  KvWireResponse response = OkResponse(0);
  for (size_t i = 0; i < ranges.size(); ++i) {
    const KvWireRange& range = ranges[i];
    if (range.num_bytes < 1 || range.offset < 0 || range.offset > pool_bytes - range.num_bytes) {
      return SendStatus(fd, absl::InvalidArgumentError(absl::StrCat(
                               "KV server: range ", i, " (", range.num_bytes, " bytes at ",
                               range.offset, ") outside the pool's ", pool_bytes, " bytes")));
    }
    spans.push_back(KvDeviceSpan{.data = pool_.BlockData(0) + range.offset,
                                 .num_bytes = static_cast<size_t>(range.num_bytes)});
    const int64_t first_block = range.offset / block_bytes;
    const int64_t last_block = (range.offset + range.num_bytes - 1) / block_bytes;
    blocks.push_back(BlockSpan{.start = static_cast<BlockId>(first_block),
                               .num_blocks = static_cast<int32_t>(last_block - first_block + 1)});
    response.payload_bytes += static_cast<uint64_t>(range.num_bytes);
  }
  absl::StatusOr<std::unique_ptr<KvGrants::Read>> read = BeginGrantedRead(fd, request, blocks);
  if (!read.ok()) return SendStatus(fd, read.status());
  num_requests_served_.fetch_add(1);
  if (!SendAll(fd, &response, sizeof(response), wait).ok()) return false;
  // A failed send leaves the link broken: the connection (and so the link) ends.
  return link->Send(spans, absl::Now() + options_.io_timeout).ok();
}

bool KvServer::ServePieces(int fd, const KvWireRequest& request) {
  std::vector<KvWirePiece> pieces(request.num_pieces);
  const IoWait wait{.stall_timeout = options_.io_timeout, .cancel_fd = stop_fd_.get()};
  if (!RecvAll(fd, pieces.data(), pieces.size() * sizeof(KvWirePiece), wait).ok()) return false;
  if (pool_.on_device()) {
    return SendStatus(fd, absl::FailedPreconditionError(
                             "KV server: this pool is in device memory; pull it over a KV link "
                             "(nccl), not inline"));
  }
  if (absl::Status status = CheckShape(request); !status.ok()) return SendStatus(fd, status);

  const KvPoolShape& shape = pool_.shape();
  // Every piece is checked before the first byte goes out: an error response is the whole answer.
  std::vector<KvSlab> slabs;
  slabs.reserve(pieces.size());
  KvWireResponse response = OkResponse(0);
  for (size_t i = 0; i < pieces.size(); ++i) {
    absl::StatusOr<KvSlab> slab = PieceSlab(pieces[i]);
    if (!slab.ok()) {
      return SendStatus(fd, absl::InvalidArgumentError(absl::StrCat(
                               "KV server: piece ", i, ": ", slab.status().message())));
    }
    response.payload_bytes +=
        PackedSlabShape(*slab, shape).BlockBytes() * static_cast<uint64_t>(pieces[i].num_blocks);
    slabs.push_back(*slab);
  }
  std::vector<BlockSpan> blocks;
  blocks.reserve(pieces.size());
  for (const KvWirePiece& piece : pieces) {
    blocks.push_back(BlockSpan{.start = piece.src_start, .num_blocks = piece.num_blocks});
  }
  // Held until the last byte is sent: a revoke meanwhile waits for it (and cuts the connection).
  absl::StatusOr<std::unique_ptr<KvGrants::Read>> read = BeginGrantedRead(fd, request, blocks);
  if (!read.ok()) return SendStatus(fd, read.status());
  num_requests_served_.fetch_add(1);  // before the send, so a client that has the bytes sees it

  // The header, then the pieces' ranges straight from the pool, a bounded batch of iovecs per
  // sendmsg; a range that continues the previous one in the pool joins its iovec.
  constexpr size_t kIovecsPerSend = 1024;
  std::byte* const pool_base = pool_.BlockData(0);
  std::vector<iovec> iov;
  iov.reserve(kIovecsPerSend + 1);
  iov.push_back({.iov_base = &response, .iov_len = sizeof(response)});
  for (size_t i = 0; i < pieces.size(); ++i) {
    for (const KvByteRange& range :
         PackedSlabByteRanges(shape, slabs[i], pieces[i].src_start, pieces[i].num_blocks)) {
      std::byte* const data = pool_base + range.src_offset;
      const size_t num_bytes = static_cast<size_t>(range.num_bytes);
      if (!iov.empty() && iov.back().iov_base != &response &&
          static_cast<std::byte*>(iov.back().iov_base) + iov.back().iov_len == data) {
        iov.back().iov_len += num_bytes;
        continue;
      }
      if (iov.size() >= kIovecsPerSend) {
        if (!SendAll(fd, std::span<iovec>(iov), wait).ok()) return false;
        iov.clear();
      }
      iov.push_back({.iov_base = data, .iov_len = num_bytes});
    }
  }
  return SendAll(fd, std::span<iovec>(iov), wait).ok();
}

absl::StatusOr<std::unique_ptr<KvGrants::Read>> KvServer::BeginGrantedRead(
    int fd, const KvWireRequest& request, std::span<const BlockSpan> spans) {
  if (options_.grants == nullptr) return nullptr;
  const absl::string_view token(reinterpret_cast<const char*>(request.grant),
                                sizeof(request.grant));
  absl::StatusOr<std::unique_ptr<KvGrants::Read>> read =
      options_.grants->BeginRead(token, spans, [fd] { shutdown(fd, SHUT_RDWR); });
  if (!read.ok()) {
    return absl::PermissionDeniedError(absl::StrCat("KV server: ", read.status().message()));
  }
  return read;
}

absl::StatusOr<KvSlab> KvServer::PieceSlab(const KvWirePiece& piece) const {
  if (piece.num_blocks < 1 || piece.src_start < 0 ||
      int64_t{piece.src_start} + piece.num_blocks > pool_.num_blocks()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "blocks [", piece.src_start, ", ", int64_t{piece.src_start} + piece.num_blocks,
        ") outside the pool of ", pool_.num_blocks(), " blocks"));
  }
  const KvSlab slab{.layer_begin = 0,
                    .layer_end = piece.num_layers,
                    .kv_head_begin = 0,
                    .kv_head_end = piece.num_kv_heads,
                    .src_layer_idx = piece.layer_idx,
                    .src_kv_head_idx = piece.kv_head_idx};
  if (piece.num_layers < 1 || piece.num_kv_heads < 1) {
    return absl::InvalidArgumentError(absl::StrCat("empty piece (", piece.num_layers,
                                                   " layers, ", piece.num_kv_heads,
                                                   " kv heads)"));
  }
  // Layers and heads inside the pool (the packed side always fits).
  const KvPoolShape& shape = pool_.shape();
  if (absl::Status status = CheckSlabFits(shape, PackedSlabShape(slab, shape), slab);
      !status.ok()) {
    return status;
  }
  return slab;
}

}  // namespace baton::runtime
