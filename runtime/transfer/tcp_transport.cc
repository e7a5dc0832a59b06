#include "runtime/transfer/tcp_transport.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/transfer/block_runs.h"
#include "runtime/transfer/kv_slab_copy.h"
#include "runtime/transfer/socket_io.h"
#include "runtime/transfer/tcp_wire.h"

namespace baton::runtime {
namespace {

constexpr uint32_t kMaxErrorMessageBytes = 1 << 16;

absl::Status Annotate(const absl::Status& status, const std::string& address) {
  return absl::Status(status.code(),
                      absl::StrCat("KV pull from ", address, ": ", status.message()));
}

// What one connection moves: the pieces asked of one prefill rank's KvServer, and where the bytes
// of its payload land in the destination pool, in payload order.
struct RankPull {
  std::string address;
  KvPoolShape shape;                // the server's pool, as the spec says
  std::vector<KvWirePiece> pieces;  // the request
  std::vector<KvByteRange> ranges;  // dst_offset, num_bytes: the payload, in order
  int64_t payload_bytes = 0;
};

// One RankPull per prefill rank that `slabs` name, in order of first mention. The pieces of a slab
// are its coalesced block runs, and the server sends each as (block, layer, K then V): the order
// in which SlabByteRanges lists the slab's destination ranges, so those are the receive buffers.
std::vector<RankPull> PlanRankPulls(std::span<const KvRankSource> sources,
                                    std::span<const KvSlab> slabs, const KvPoolShape& dst_shape,
                                    std::span<const BlockId> dst_blocks) {
  std::vector<RankPull> pulls;
  std::vector<int> pull_idx_of_rank(sources.size(), -1);
  for (const KvSlab& slab : slabs) {
    const KvRankSource& source = sources[slab.src_rank_idx];
    int& pull_idx = pull_idx_of_rank[slab.src_rank_idx];
    if (pull_idx < 0) {
      pull_idx = static_cast<int>(pulls.size());
      pulls.push_back(RankPull{.address = source.source.tcp_address, .shape = source.shape});
    }
    RankPull& pull = pulls[pull_idx];
    for (const BlockRun& run : CoalesceBlockRuns(source.src_blocks, dst_blocks)) {
      pull.pieces.push_back(KvWirePiece{.src_start = run.src_start,
                                        .num_blocks = run.num_blocks,
                                        .layer_idx = slab.src_layer_idx,
                                        .num_layers = slab.num_layers(),
                                        .kv_head_idx = slab.src_kv_head_idx,
                                        .num_kv_heads = slab.num_kv_heads()});
    }
    const std::vector<KvByteRange> ranges =
        SlabByteRanges(source.shape, dst_shape, slab, source.src_blocks, dst_blocks);
    pull.payload_bytes += TotalBytes(ranges);
    pull.ranges.insert(pull.ranges.end(), ranges.begin(), ranges.end());
  }
  return pulls;
}

// The ranks of one pull, pulled concurrently: the first failure, which cancels every wait of the
// others (through an eventfd), and a barrier that holds every payload until all servers have
// accepted their requests, so a request that a server rejects leaves `dst` untouched, as shm does.
class RankPullGroup {
 public:
  static absl::StatusOr<std::unique_ptr<RankPullGroup>> Create(int num_ranks, absl::Time deadline) {
    UniqueFd cancel(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!cancel.valid()) return absl::InternalError("KV pull over TCP: cannot create an eventfd");
    return std::unique_ptr<RankPullGroup>(
        new RankPullGroup(num_ranks, deadline, std::move(cancel)));
  }

  IoWait wait() const { return IoWait{.deadline = deadline_, .cancel_fd = cancel_.get()}; }

  // Keeps the first failure and cancels the others' waits. The others' own errors (Cancelled among
  // them) are its consequences and are dropped.
  void Fail(absl::Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!first_failure_.ok()) return;
    first_failure_ = std::move(status);
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = write(cancel_.get(), &one, sizeof(one));
    all_accepted_.notify_all();
  }

  // A rank's server has accepted its request. Returns once every rank's has (OK), or with
  // Cancelled once a rank has failed, or DeadlineExceeded.
  absl::Status AcceptedAwaitOthers() {
    std::unique_lock<std::mutex> lock(mu_);
    ++num_accepted_;
    const auto settled = [this] { return num_accepted_ == num_ranks_ || !first_failure_.ok(); };
    all_accepted_.notify_all();
    if (deadline_ == absl::InfiniteFuture()) {
      all_accepted_.wait(lock, settled);
    } else if (!all_accepted_.wait_until(lock, absl::ToChronoTime(deadline_), settled)) {
      return absl::DeadlineExceededError("deadline exceeded while other ranks' servers answered");
    }
    return first_failure_.ok() ? absl::OkStatus() : absl::CancelledError("another rank failed");
  }

  absl::Status first_failure() const {
    std::lock_guard<std::mutex> lock(mu_);
    return first_failure_;
  }

 private:
  RankPullGroup(int num_ranks, absl::Time deadline, UniqueFd cancel)
      : num_ranks_(num_ranks), deadline_(deadline), cancel_(std::move(cancel)) {}

  const int num_ranks_;
  const absl::Time deadline_;
  const UniqueFd cancel_;  // readable once a rank has failed
  mutable std::mutex mu_;
  std::condition_variable all_accepted_;
  int num_accepted_ = 0;       // guarded by mu_
  absl::Status first_failure_;  // guarded by mu_
};

// One request/response exchange with one KvServer, the payload received into dst_base + ranges
// once every rank of `group` has been accepted.
absl::Status PullFromRank(const RankPull& pull, std::byte* dst_base, RankPullGroup& group) {
  const std::string& address = pull.address;
  const IoWait wait = group.wait();
  absl::StatusOr<UniqueFd> fd = ConnectTcp(address, wait);
  if (!fd.ok()) return Annotate(fd.status(), address);

  const KvWireRequest request{.magic = kKvWireMagic,
                              .version = kKvWireVersion,
                              .num_pieces = static_cast<uint32_t>(pull.pieces.size()),
                              .num_layers = pull.shape.num_layers,
                              .num_kv_heads = pull.shape.num_kv_heads,
                              .head_dim = pull.shape.head_dim,
                              .block_size = pull.shape.block_size,
                              .reserved = 0};
  iovec request_iov[2] = {
      {.iov_base = const_cast<KvWireRequest*>(&request), .iov_len = sizeof(request)},
      {.iov_base = const_cast<KvWirePiece*>(pull.pieces.data()),
       .iov_len = pull.pieces.size() * sizeof(KvWirePiece)}};
  if (absl::Status status = SendAll(fd->get(), std::span<iovec>(request_iov, 2), wait);
      !status.ok()) {
    return Annotate(status, address);
  }

  KvWireResponse response{};
  if (absl::Status status = RecvAll(fd->get(), &response, sizeof(response), wait); !status.ok()) {
    return Annotate(status, address);
  }
  if (response.magic != kKvWireMagic) {
    return absl::InternalError(absl::StrCat("KV pull from ", address, ": bad response magic"));
  }
  if (response.status_code != 0) {
    if (response.message_bytes > kMaxErrorMessageBytes || response.status_code < 0 ||
        response.status_code > static_cast<int32_t>(absl::StatusCode::kUnauthenticated)) {
      return absl::InternalError(
          absl::StrCat("KV pull from ", address, ": malformed error response"));
    }
    std::string message(response.message_bytes, '\0');
    if (absl::Status status = RecvAll(fd->get(), message.data(), message.size(), wait);
        !status.ok()) {
      return Annotate(status, address);
    }
    return absl::Status(static_cast<absl::StatusCode>(response.status_code),
                        absl::StrCat("KV pull from ", address, ": ", message));
  }
  if (response.payload_bytes != static_cast<uint64_t>(pull.payload_bytes) ||
      response.message_bytes != 0) {
    return absl::InternalError(absl::StrCat("KV pull from ", address, ": server announced ",
                                            response.payload_bytes, " payload bytes, expected ",
                                            pull.payload_bytes));
  }
  if (absl::Status status = group.AcceptedAwaitOthers(); !status.ok()) {
    return Annotate(status, address);
  }
  std::vector<iovec> iov;
  iov.reserve(pull.ranges.size());
  for (const KvByteRange& range : pull.ranges) {
    iov.push_back({.iov_base = dst_base + range.dst_offset,
                   .iov_len = static_cast<size_t>(range.num_bytes)});
  }
  if (absl::Status status = RecvAll(fd->get(), std::span<iovec>(iov), wait); !status.ok()) {
    return Annotate(status, address);
  }
  return absl::OkStatus();
}

// Runs every pull, the first on the calling thread and each other one on a thread of its own, and
// returns once all have stopped: OK, or the first failure.
absl::Status RunRankPulls(std::span<const RankPull> pulls, std::byte* dst_base,
                          absl::Time deadline) {
  absl::StatusOr<std::unique_ptr<RankPullGroup>> group =
      RankPullGroup::Create(static_cast<int>(pulls.size()), deadline);
  if (!group.ok()) return group.status();
  const auto run = [dst_base, &group = **group](const RankPull& pull) {
    if (absl::Status status = PullFromRank(pull, dst_base, group); !status.ok()) {
      group.Fail(std::move(status));
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(pulls.size() - 1);
  for (size_t i = 1; i < pulls.size(); ++i) {
    try {
      threads.emplace_back(run, std::cref(pulls[i]));
    } catch (const std::system_error& e) {
      // The ranks without a thread never reach the barrier: those started are cancelled.
      (*group)->Fail(
          absl::InternalError(absl::StrCat("KV pull over TCP: cannot start a thread: ", e.what())));
      break;
    }
  }
  run(pulls[0]);
  for (std::thread& thread : threads) thread.join();
  return (*group)->first_failure();
}

}  // namespace

absl::Status TcpKvTransport::Pull(const KvPullSpec& spec, const KvPool& dst,
                                  std::span<const BlockId> dst_blocks, absl::Time deadline) {
  if (absl::Status status = ValidatePull(spec, dst, dst_blocks); !status.ok()) return status;
  // A same-layout pull is the one slab that spans the whole pool of its one source.
  const KvRankSource whole_source =
      spec.resliced() ? KvRankSource{}
                      : KvRankSource{.source = spec.source,
                                     .shape = spec.shape,
                                     .src_blocks = spec.src_blocks};
  const KvSlab whole_slab = WholePoolSlab(spec.shape);
  const std::span<const KvRankSource> sources =
      spec.resliced() ? std::span<const KvRankSource>(spec.rank_sources)
                      : std::span<const KvRankSource>(&whole_source, 1);
  const std::span<const KvSlab> slabs = spec.resliced() ? std::span<const KvSlab>(spec.slabs)
                                                        : std::span<const KvSlab>(&whole_slab, 1);
  // Every address is checked before anything connects, so a bad one cannot leave a partial copy.
  for (const KvSlab& slab : slabs) {
    const std::string& address = sources[slab.src_rank_idx].source.tcp_address;
    if (address.empty()) {
      return absl::InvalidArgumentError(
          spec.resliced() ? absl::StrCat("KV pull over TCP: prefill rank ", slab.src_rank_idx,
                                         "'s source names no TCP address")
                          : "KV pull over TCP: the source names no TCP address");
    }
    if (absl::StatusOr<HostPort> parsed = ParseHostPort(address); !parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("KV pull over TCP: ", parsed.status().message()));
    }
  }
  if (dst_blocks.empty()) return absl::OkStatus();
  if (absl::Now() >= deadline) {
    return absl::DeadlineExceededError(absl::StrCat(
        "KV pull from ", sources[slabs[0].src_rank_idx].source.tcp_address,
        ": deadline passed before connecting"));
  }
  const std::vector<RankPull> pulls = PlanRankPulls(sources, slabs, dst.shape(), dst_blocks);
  if (absl::Status status = RunRankPulls(pulls, dst.BlockData(0), deadline); !status.ok()) {
    return status;
  }
  int64_t bytes = 0;
  for (const RankPull& pull : pulls) bytes += pull.payload_bytes;
  num_bytes_received_.fetch_add(bytes, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace baton::runtime
