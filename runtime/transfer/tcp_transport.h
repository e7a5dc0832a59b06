// TcpKvTransport: pulls KV blocks from a KvServer (kv_server.h) over TCP, for instances on other
// hosts.
//
// One connection per Pull: connect, send one request naming every coalesced run (tcp_wire.h), then
// receive the payload run by run straight into the destination blocks (no staging buffer). Every
// wait (connect, send, each recv) is bounded by the pull's deadline. Thread-safe (no shared state).
#pragma once

#include "runtime/transfer/kv_transport.h"

namespace baton::runtime {

class TcpKvTransport : public KvTransport {
 public:
  // See KvTransport::Pull. Also InvalidArgument if spec.source.tcp_address is empty or malformed,
  // or if the server rejects the request (its pool's shape differs from spec.shape, source block
  // out of range: the server's message is passed through), and for any re-slicing spec
  // (KvPullSpec::slabs): the wire protocol serves whole blocks only. Unavailable if the server cannot be
  // reached or closes the connection before the last byte; Internal if it breaks the protocol.
  absl::Status Pull(const KvPullSpec& spec, const KvPool& dst, std::span<const BlockId> dst_blocks,
                    absl::Time deadline) override;
  std::string_view name() const override { return "tcp"; }
};

}  // namespace baton::runtime
