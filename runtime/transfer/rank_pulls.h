// The per-prefill-rank plan of a pull and the group that runs the ranks concurrently: the parts
// the two transports that talk to KvServers share (TcpKvTransport receives each rank's bytes on its
// connection, NcclKvTransport over the rank's KV link).
//
// Every pull is a list of slabs (kv_slab_mapping.h): a same-layout spec is the one slab that spans
// the whole pool (WholePoolSlab, kv_slab_copy.h), a re-slicing spec names its own, from one or more
// prefill ranks. A RankPull gathers what one prefill rank sends: its slabs' pieces (one per
// coalesced run of blocks, tcp_wire.h) and the byte ranges of SlabByteRanges (kv_slab_copy.h), in
// the order the rank sends them, with both sides' offsets.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <condition_variable>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/transfer/kv_slab_copy.h"
#include "runtime/transfer/kv_transport.h"
#include "runtime/transfer/socket_io.h"
#include "runtime/transfer/tcp_wire.h"

namespace baton::runtime {

struct RankPull {
  std::string address;              // the prefill rank's KvServer
  KvPoolShape shape;                // its pool, as the spec says
  std::vector<KvWirePiece> pieces;  // its slabs' pieces, coalesced runs
  std::vector<KvByteRange> ranges;  // source and destination offsets, in the order sent
  int64_t payload_bytes = 0;        // the sum of ranges' num_bytes
  std::string kv_grant;             // KvPullSpec::kv_grant
};

// A request header of `kind` with `num_pieces` pieces or ranges, for a pool of `shape`, presenting
// `kv_grant` (empty or KvGrants::kTokenBytes, as ValidatePull allows; empty: zeros).
KvWireRequest KvRequestHeader(const KvPoolShape& shape, std::string_view kv_grant, KvWireKind kind,
                              size_t num_pieces);

// InvalidArgument (naming `transport` and the rank) if a prefill rank that a slab of the spec names
// (the spec's source, for a same-layout spec) has an empty or malformed tcp_address. Pre-condition:
// ValidatePull(spec, ...) is OK.
absl::Status CheckSourceAddresses(const KvPullSpec& spec, absl::string_view transport);

// InvalidArgument unless every prefill rank a slab of the spec names (the spec's source, for a
// same-layout spec) serves its pool over KV links of `kind` (KvSource::kv_link; "" for pools in
// host memory): prefill and decode workers run on the same kind of device. Pre-condition:
// ValidatePull(spec, ...) is OK.
absl::Status CheckSourceKvLinks(const KvPullSpec& spec, const std::string& kind);

// One RankPull per prefill rank the spec's slabs name, in order of first mention. Pre-condition:
// ValidatePull(spec, dst, dst_blocks) is OK.
std::vector<RankPull> PlanRankPulls(const KvPullSpec& spec, const KvPoolShape& dst_shape,
                                    std::span<const BlockId> dst_blocks);
// The same, or DeadlineExceeded (naming the first rank) if `deadline` has passed already. Also
// pre-condition: dst_blocks is not empty.
absl::StatusOr<std::vector<RankPull>> PlanRankPullsBefore(absl::Time deadline,
                                                         const KvPullSpec& spec,
                                                         const KvPoolShape& dst_shape,
                                                         std::span<const BlockId> dst_blocks);

// The ranks of one pull, pulled concurrently: the first failure, which cancels every wait of the
// others (through an eventfd; the caller's KvPullWait::cancel_fd cancels them all the same way), and a barrier that holds every payload until all servers have
// accepted their requests, so a request that a server rejects leaves `dst` untouched, as shm does.
class RankPullGroup {
 public:
  static absl::StatusOr<std::unique_ptr<RankPullGroup>> Create(int num_ranks,
                                                               const KvPullWait& pull_wait);

  absl::Time deadline() const { return deadline_; }
  IoWait wait() const {
    return IoWait{
        .deadline = deadline_, .cancel_fd = cancel_.get(), .caller_cancel_fd = caller_cancel_fd_};
  }

  // Keeps the first failure and cancels the others' waits. The others' own errors (Cancelled among
  // them) are its consequences and are dropped.
  void Fail(absl::Status status);

  // A rank's server has accepted its request. Returns once every rank's has (OK), or with
  // Cancelled once a rank has failed, or DeadlineExceeded.
  absl::Status AcceptedAwaitOthers();

  absl::Status first_failure() const;

 private:
  RankPullGroup(int num_ranks, const KvPullWait& pull_wait, UniqueFd cancel)
      : num_ranks_(num_ranks),
        deadline_(pull_wait.deadline),
        cancel_(std::move(cancel)),
        caller_cancel_fd_(pull_wait.cancel_fd) {}

  const int num_ranks_;
  const absl::Time deadline_;
  const UniqueFd cancel_;  // readable once a rank has failed
  const int caller_cancel_fd_;  // KvPullWait::cancel_fd
  mutable std::mutex mu_;
  std::condition_variable all_accepted_;
  int num_accepted_ = 0;        // guarded by mu_
  absl::Status first_failure_;  // guarded by mu_
};

// Runs pull_rank(pull, group) for every pull, the first on the calling thread and each other one
// on a thread of its own, and returns once all have stopped: OK, or the first failure.
absl::Status RunRankPulls(
    std::span<const RankPull> pulls, const KvPullWait& wait,
    const std::function<absl::Status(const RankPull&, RankPullGroup&)>& pull_rank);

// Connects to a KvServer and sends the hello with `secret` (tcp_wire.h); a server that refuses the
// secret answers the first request Unauthenticated.
absl::StatusOr<UniqueFd> ConnectKvServer(const std::string& address, const std::string& secret,
                                         const IoWait& wait);

// Sends a request (header and what follows it) to a KvServer and reads the response header. The
// server's error, if it answers one, as its status code with "KV pull from <address>: " and its
// message; Internal for a malformed response; the socket's codes otherwise.
absl::StatusOr<KvWireResponse> ExchangeKvRequest(int fd, std::span<iovec> request,
                                                 const IoWait& wait, const std::string& address);

// `status` with "KV pull from <address>: " before its message.
absl::Status AnnotateKvPull(const absl::Status& status, const std::string& address);

}  // namespace baton::runtime
