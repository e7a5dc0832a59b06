// KvServer: serves one prefill rank's KV pool to decode instances (tcp_wire.h protocol).
//
// Runs on the prefill worker next to its pool. A listener thread accepts connections; each
// connection gets its own thread that answers its requests in turn:
//   - a pool in host memory: "send me these pieces" (a piece: some layers x KV heads of a run of
//     blocks, or whole blocks), by sending the bytes on the connection straight from the pool
//     (sendmsg, one iovec per contiguous range; no staging copy) — TcpKvTransport's side;
//   - a pool in device memory (options.link_factory set): the connection is the control channel of
//     a KvLink (kv_link.h; NCCL on GPUs) that the client asks the server to join, and "send me
//     these byte ranges" sends them over that link — NcclKvTransport's side. The link lives as
//     long as its connection, so a decode rank that keeps the connection keeps the link warm, and
//     an idle connection (io_timeout) frees it.
// Every piece or range is checked against the pool first: a request that reaches outside it gets
// an error response, never bytes. The server only reads the pool: keeping the requested blocks
// allocated and unwritten until the decode side reports back is the caller's contract
// (kv_transport.h, lifecycle step 4). With a secret (options.secret, the deployment's), a
// connection whose hello does not present it gets Unauthenticated and is closed before any KV is
// read or sent. A connection that has not sent its hello within hello_timeout is closed, and those
// still waiting for theirs have a cap of their own (max_unauthenticated_connections; past it the
// oldest is closed to make room), so connections that never authenticate cannot keep a puller out:
// its hello arrives with its connection. With grants (options.grants, the prefill worker's), a
// request reads only blocks of the live grant it presents (kv_grants.h); a grant revoked mid-send
// cuts its connection.

#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/kv_cache/kv_pool.h"
#include "runtime/transfer/kv_grants.h"
#include "runtime/transfer/kv_link.h"
#include "runtime/transfer/kv_slab_mapping.h"
#include "runtime/transfer/socket_io.h"
#include "runtime/transfer/tcp_wire.h"

namespace baton::runtime {

struct KvServerOptions {
  // Address to listen on. Default loopback; "0.0.0.0" (or "::") to serve other hosts.
  std::string host = "127.0.0.1";
  // The host address() names, which pullers dial; empty: ReachableHost(host).
  std::string advertise_host;
  int port = 0;  // 0: pick a free port (see KvServer::port())
  // A connection that makes no progress for this long (idle between requests, or stalled while a
  // request or response is in flight) is closed. Default 30 s.
  absl::Duration io_timeout = absl::Seconds(30);
  // Authenticated connections beyond this many are answered Unavailable and closed.
  int max_connections = 64;
  // Connections that have not sent their hello yet: each has hello_timeout to do so, and past this
  // many the oldest is closed.
  absl::Duration hello_timeout = absl::Seconds(2);
  int max_unauthenticated_connections = 16;
  // Non-null: the pool is in device memory and is served over links this factory joins (it must
  // outlive the server); null: a host pool, served inline.
  KvLinkFactory* link_factory = nullptr;
  // Links (each a connection that joined one) beyond this many are refused (ResourceExhausted):
  // each holds device resources (an NCCL communicator).
  int max_links = 16;
  // The deployment secret each connection's hello must present (tcp_wire.h); empty: any caller.
  std::string secret;
  // Non-null: every request reads only blocks of the live grant it presents (it must outlive the
  // server); null: any block of the pool (a server that is not a worker's: tests, tools).
  KvGrants* grants = nullptr;
};

class KvServer {
 public:
  // Listens and starts the listener thread. `pool` must outlive the server. InvalidArgument for a
  // bad host, Unavailable if the port is taken, Internal if a thread or eventfd cannot be had.
  static absl::StatusOr<std::unique_ptr<KvServer>> Start(const KvPool& pool,
                                                         const KvServerOptions& options);

  // Calls Stop().
  ~KvServer();
  KvServer(const KvServer&) = delete;
  KvServer& operator=(const KvServer&) = delete;

  // Stops accepting, cuts every connection short (a client mid-response sees Unavailable), and
  // joins every thread: when it returns, nothing of the server touches the pool. Idempotent; not to
  // be called concurrently with itself.
  void Stop();

  int port() const { return port_; }
  // "host:port" for clients to dial: the listen host, or this machine's hostname when listening on
  // every interface.
  std::string address() const;
  // Requests answered with an OK header so far, on all connections (counted before the payload is
  // sent, so it includes responses cut short by a dying client).
  int64_t num_requests_served() const { return num_requests_served_.load(); }
  // Links joined so far, on all connections (the live ones and those since closed).
  int64_t num_links_joined() const { return num_links_joined_.load(); }

 private:
  enum ConnectionState : int { kAwaitingHello, kAuthenticated, kEvicted };
  struct Connection {
    // Owned here, not by the thread, so that the listener can shut it down (evicting it) without
    // racing its close; closed when the connection is reaped.
    UniqueFd fd;
    std::thread thread;
    std::atomic<int> state{kAwaitingHello};
    std::atomic<bool> done{false};
  };

  KvServer(const KvPool& pool, const KvServerOptions& options, UniqueFd listen_fd, UniqueFd stop_fd,
           int port)
      : pool_(pool),
        options_(options),
        listen_fd_(std::move(listen_fd)),
        stop_fd_(std::move(stop_fd)),
        port_(port) {}

  void AcceptLoop();  // the listener thread
  // The connection's hello (tcp_wire.h): OK when it presents the secret, or there is none.
  absl::Status ReadHello(int fd);
  void ServeConnection(Connection& connection);
  // Makes room for a new connection among those awaiting their hello: closes the oldest when they
  // are at their cap.
  void EvictOldestAwaitingHello();
  // Answers one request whose header is already read (`link`: the connection's, if it joined one).
  // Returns false to close the connection.
  bool ServeRequest(int fd, const KvWireRequest& request, std::unique_ptr<KvLink>& link);
  bool ServePieces(int fd, const KvWireRequest& request);
  bool JoinLink(int fd, const KvWireRequest& request, std::unique_ptr<KvLink>& link);
  bool SendOverLink(int fd, const KvWireRequest& request, KvLink* link);
  // Sends a response without payload: `status` (OK, or the error and its message).
  bool SendStatus(int fd, const absl::Status& status);
  // InvalidArgument, naming both, unless the request's shape (element type included) is this
  // pool's.
  absl::Status CheckShape(const KvWireRequest& request) const;
  // The slab of this pool that `piece` names (source-local indices), or InvalidArgument if its
  // blocks, layers or KV heads are empty or reach outside the pool.
  absl::StatusOr<KvSlab> PieceSlab(const KvWirePiece& piece) const;
  // With grants: the read of `spans` under the request's grant (its end lets a Revoke return), or
  // PermissionDenied; a revoke meanwhile shuts `fd` down. Without: null, and OK.
  absl::StatusOr<std::unique_ptr<KvGrants::Read>> BeginGrantedRead(
      int fd, const KvWireRequest& request, std::span<const BlockSpan> spans);
  void ReapFinishedConnections();

  const KvPool& pool_;
  const KvServerOptions options_;
  UniqueFd listen_fd_;
  UniqueFd stop_fd_;  // eventfd, readable once Stop() begins: wakes every wait
  int port_;
  std::thread listener_;
  std::list<std::unique_ptr<Connection>> connections_;  // listener thread only (then Stop())
  std::atomic<int64_t> num_requests_served_{0};
  std::atomic<int64_t> num_links_joined_{0};
  std::atomic<int> num_live_links_{0};
  std::atomic<int> num_authenticated_{0};
  bool stopped_ = false;
};

}  // namespace baton::runtime
