// NcclKvTransport: pulls KV blocks between pools in device memory (GPU workers, or the
// cuda-emulated device) over KV links (kv_link.h): NCCL send/recv between the prefill rank's GPU
// and the decode rank's, with the prefill rank's KvServer (kv_server.h) as the control channel.
//
// Per prefill rank a pull reads from (the RankPulls of rank_pulls.h, as TCP plans them):
//  1. take a warm link to that rank from the pool (kv_link_pool.h), or make one: connect to its
//     KvServer, ask it for a link (it makes the NCCL unique id and answers it on the connection),
//     and join as the receiver while it joins as the sender;
//  2. send one over-link request naming the source byte ranges of SlabByteRanges (kv_slab_copy.h),
//     coalesced wherever both pools continue, so a same-layout pull of a run of consecutive blocks
//     is one span and the spans of both sides pair one for one;
//  3. once every prefill rank has accepted its request (the barrier of RankPullGroup: a request a
//     server rejects leaves `dst` untouched), receive the spans straight into the destination pool
//     (one grouped ncclRecv per pull on the receiving side, one grouped ncclSend on the sending);
//  4. return the link to the pool.
// Several prefill ranks are pulled concurrently, one thread each. A link that fails in any way is
// dropped, never reused; a warm link whose server went away (its idle timeout, a restart) is
// noticed at step 2 and the rank is retried once on a fresh link. Every wait is bounded by the
// pull's deadline. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>

#include <string>
#include <utility>

#include "absl/time/time.h"
#include "runtime/transfer/kv_link.h"
#include "runtime/transfer/kv_link_pool.h"
#include "runtime/transfer/kv_transport.h"

namespace baton::runtime {

struct NcclKvTransportOptions {
  // Idle links kept warm, over all prefill ranks; the least recently used beyond are closed.
  int max_idle_links = 8;
  // A link idle longer is closed rather than reused: below KvServerOptions::io_timeout (30 s),
  // after which the server closes its end.
  absl::Duration max_idle = absl::Seconds(20);
  // The deployment secret each control connection presents (tcp_wire.h's hello); empty: none.
  std::string secret;
};

class NcclKvTransport : public KvTransport {
 public:
  // `factory` (NCCL, or the emulated link) must outlive the transport.
  explicit NcclKvTransport(KvLinkFactory* factory, NcclKvTransportOptions options = {})
      : factory_(factory), secret_(std::move(options.secret)), links_(options.max_idle_links, options.max_idle) {}

  // See KvTransport::Pull. Also InvalidArgument if `dst` is not in device memory, if a source names
  // no KV link of this transport's kind (KvSource::kv_link) or no usable tcp_address. A server's
  // rejection is passed through (e.g. InvalidArgument for a shape mismatch or a range outside its
  // pool; ResourceExhausted when it has too many links); Unavailable if a server or link peer goes
  // away; DeadlineExceeded; Internal for a protocol violation.
  absl::Status Pull(const KvPullSpec& spec, const KvPool& dst, std::span<const BlockId> dst_blocks,
                    const KvPullWait& wait) override;
  std::string_view name() const override { return "nccl"; }

  // Links joined so far (new ones; a reused link is not counted again).
  int64_t num_links_joined() const { return num_links_joined_.load(); }
  int num_idle_links() const { return links_.num_idle(); }
  // Bytes written into destination pools by successful pulls so far.
  int64_t num_bytes_received() const { return num_bytes_received_.load(); }

 private:
  absl::StatusOr<std::unique_ptr<PooledKvLink>> NewLink(const std::string& address,
                                                        const KvPoolShape& shape, int device,
                                                        absl::Time deadline);

  KvLinkFactory* const factory_;
  const std::string secret_;
  KvLinkPool links_;
  std::atomic<int64_t> num_links_joined_{0};
  std::atomic<int64_t> num_bytes_received_{0};
};

}  // namespace baton::runtime
