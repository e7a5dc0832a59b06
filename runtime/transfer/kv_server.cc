#include "runtime/transfer/kv_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/transfer/kv_slab_copy.h"
#include "runtime/transfer/kv_transport.h"

namespace baton::runtime {

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
  const std::string& host = options_.host;
  if (host.empty() || host == "0.0.0.0" || host == "::") {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    return absl::StrCat(name, ":", port_);
  }
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", port_);
  return absl::StrCat(host, ":", port_);
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
    if (static_cast<int>(connections_.size()) >= options_.max_connections) continue;  // closes fd
    const int one = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto connection = std::make_unique<Connection>();
    Connection* raw = connection.get();
    try {
      connection->thread = std::thread([this, raw, conn_fd = std::move(fd)]() mutable {
        ServeConnection(std::move(conn_fd));
        raw->done.store(true);
      });
    } catch (const std::system_error&) {
      continue;  // no thread: the connection is closed and the client retries
    }
    connections_.push_back(std::move(connection));
  }
}

void KvServer::ServeConnection(UniqueFd fd) {
  for (;;) {
    const IoWait idle{.deadline = absl::Now() + options_.io_timeout, .cancel_fd = stop_fd_.get()};
    if (!WaitReadable(fd.get(), idle).ok()) return;
    KvWireRequest request{};
    const IoWait wait{.stall_timeout = options_.io_timeout, .cancel_fd = stop_fd_.get()};
    if (!RecvAll(fd.get(), &request, sizeof(request), wait).ok()) return;  // includes a clean close
    if (!ServeRequest(fd.get(), request)) return;
  }
}

bool KvServer::SendError(int fd, const absl::Status& status) {
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

bool KvServer::ServeRequest(int fd, const KvWireRequest& request) {
  if (request.magic != kKvWireMagic || request.version != kKvWireVersion) {
    SendError(fd,
              absl::InvalidArgumentError(absl::StrCat(
                  "KV server: bad request magic/version (expected version ", kKvWireVersion, ")")));
    return false;  // the framing cannot be trusted any more
  }
  if (request.num_pieces > kKvWireMaxPieces) {
    SendError(fd, absl::InvalidArgumentError(
                      absl::StrCat("KV server: ", request.num_pieces, " pieces in one request")));
    return false;  // the pieces that follow are not read
  }
  std::vector<KvWirePiece> pieces(request.num_pieces);
  const IoWait wait{.stall_timeout = options_.io_timeout, .cancel_fd = stop_fd_.get()};
  if (!RecvAll(fd, pieces.data(), pieces.size() * sizeof(KvWirePiece), wait).ok()) return false;

  const KvPoolShape& shape = pool_.shape();
  const KvPoolShape expected{.num_layers = request.num_layers,
                             .num_kv_heads = request.num_kv_heads,
                             .head_dim = request.head_dim,
                             .block_size = request.block_size};
  if (!(expected == shape)) {
    return SendError(fd, absl::InvalidArgumentError(absl::StrCat(
                             "KV server: the request expects a pool of shape (",
                             ShapeString(expected), ") but this pool is (", ShapeString(shape),
                             ")")));
  }
  // Every piece is checked before the first byte goes out: an error response is the whole answer.
  std::vector<KvSlab> slabs;
  slabs.reserve(pieces.size());
  KvWireResponse response{.magic = kKvWireMagic,
                          .status_code = 0,
                          .message_bytes = 0,
                          .reserved = 0,
                          .payload_bytes = 0};
  for (size_t i = 0; i < pieces.size(); ++i) {
    absl::StatusOr<KvSlab> slab = PieceSlab(pieces[i]);
    if (!slab.ok()) {
      return SendError(fd, absl::InvalidArgumentError(absl::StrCat(
                               "KV server: piece ", i, ": ", slab.status().message())));
    }
    response.payload_bytes +=
        PackedSlabShape(*slab, shape).BlockBytes() * static_cast<uint64_t>(pieces[i].num_blocks);
    slabs.push_back(*slab);
  }
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
