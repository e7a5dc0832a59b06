// TcpKvTransport: pulls KV blocks from KvServers (kv_server.h) over TCP, for instances on other
// hosts.
//
// Every pull is a list of slabs (kv_slab_mapping.h): a same-layout spec is the one slab that spans
// the whole pool (WholePoolSlab, kv_slab_copy.h), a re-slicing spec names its own, from one or more
// prefill ranks. Per prefill rank a slab names: one connection to that rank's KvServer, one request
// naming, for each of its slabs and each coalesced run of blocks (kv_cache/block_runs.h), the
// slab's piece (tcp_wire.h), then the payload received straight into the destination pool: one
// recvmsg iovec per destination range of SlabByteRanges (kv_slab_copy.h), which come in payload
// order, so there is no staging buffer. Several prefill ranks are pulled concurrently, one thread
// each (the calling thread takes the first); the first failure cancels the others, and Pull joins
// every thread before it returns, so nothing writes to `dst` afterwards. Every wait (connect, send,
// each recv) is bounded by the pull's deadline. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include "runtime/transfer/kv_transport.h"

namespace baton::runtime {

class TcpKvTransport : public KvTransport {
 public:
  // `secret`: the deployment secret every connection presents (tcp_wire.h's hello); empty: none.
  explicit TcpKvTransport(std::string secret = "") : secret_(std::move(secret)) {}

  // See KvTransport::Pull. Also InvalidArgument if the source's tcp_address (for a re-slicing spec:
  // that of any prefill rank a slab names) is empty or malformed, or if a server rejects the
  // request (its pool's shape differs from the spec's, a source block out of range: the server's
  // message is passed through). Unavailable if a server cannot be reached or closes the connection
  // before the last byte; Internal if it breaks the protocol. With several prefill ranks, the first
  // failure is returned.
  absl::Status Pull(const KvPullSpec& spec, const KvPool& dst, std::span<const BlockId> dst_blocks,
                    const KvPullWait& wait) override;
  std::string_view name() const override { return "tcp"; }

  // Bytes written into destination pools by successful pulls so far (all threads).
  int64_t num_bytes_received() const { return num_bytes_received_.load(std::memory_order_relaxed); }

 private:
  const std::string secret_;
  std::atomic<int64_t> num_bytes_received_{0};
};

}  // namespace baton::runtime
