#include "runtime/transfer/rank_pulls.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "runtime/kv_cache/block_runs.h"
#include "runtime/transfer/kv_dtype.h"

namespace baton::runtime {
namespace {

constexpr uint32_t kMaxErrorMessageBytes = 1 << 16;

// The spec as slabs over rank sources: a same-layout spec is the one slab that spans the whole
// pool of its one source.
struct SpecSlabs {
  explicit SpecSlabs(const KvPullSpec& spec)
      : whole_source(spec.resliced() ? KvRankSource{}
                                     : KvRankSource{.source = spec.source,
                                                    .shape = spec.shape,
                                                    .src_blocks = spec.src_blocks}),
        whole_slab(WholePoolSlab(spec.shape)),
        sources(spec.resliced() ? std::span<const KvRankSource>(spec.rank_sources)
                                : std::span<const KvRankSource>(&whole_source, 1)),
        slabs(spec.resliced() ? std::span<const KvSlab>(spec.slabs)
                              : std::span<const KvSlab>(&whole_slab, 1)) {}
  SpecSlabs(const SpecSlabs&) = delete;

  const KvRankSource whole_source;
  const KvSlab whole_slab;
  const std::span<const KvRankSource> sources;
  const std::span<const KvSlab> slabs;
};

}  // namespace

absl::Status AnnotateKvPull(const absl::Status& status, const std::string& address) {
  return absl::Status(status.code(),
                      absl::StrCat("KV pull from ", address, ": ", status.message()));
}

absl::Status CheckSourceAddresses(const KvPullSpec& spec, absl::string_view transport) {
  const SpecSlabs plan(spec);
  for (const KvSlab& slab : plan.slabs) {
    const std::string& address = plan.sources[slab.src_rank_idx].source.tcp_address;
    if (address.empty()) {
      return absl::InvalidArgumentError(
          spec.resliced() ? absl::StrCat("KV pull over ", transport, ": prefill rank ",
                                         slab.src_rank_idx, "'s source names no TCP address")
                          : absl::StrCat("KV pull over ", transport,
                                         ": the source names no TCP address"));
    }
    if (absl::StatusOr<HostPort> parsed = ParseHostPort(address); !parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("KV pull over ", transport, ": ", parsed.status().message()));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSourceKvLinks(const KvPullSpec& spec, const std::string& kind) {
  const auto describe = [](const std::string& link) {
    return link.empty() ? std::string("a pool in host memory")
                        : absl::StrCat("a pool in device memory over ", link, " links");
  };
  const SpecSlabs plan(spec);
  for (const KvSlab& slab : plan.slabs) {
    const KvSource& source = plan.sources[slab.src_rank_idx].source;
    if (source.kv_link == kind) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "KV pull into ", describe(kind), ": ",
        spec.resliced() ? absl::StrCat("prefill rank ", slab.src_rank_idx) : "the source",
        " serves ", describe(source.kv_link),
        " (prefill and decode workers must run on the same kind of device)"));
  }
  return absl::OkStatus();
}

std::vector<RankPull> PlanRankPulls(const KvPullSpec& spec, const KvPoolShape& dst_shape,
                                    std::span<const BlockId> dst_blocks) {
  const SpecSlabs plan(spec);
  std::vector<RankPull> pulls;
  std::vector<int> pull_idx_of_rank(plan.sources.size(), -1);
  for (const KvSlab& slab : plan.slabs) {
    const KvRankSource& source = plan.sources[slab.src_rank_idx];
    int& pull_idx = pull_idx_of_rank[slab.src_rank_idx];
    if (pull_idx < 0) {
      pull_idx = static_cast<int>(pulls.size());
      pulls.push_back(RankPull{
          .address = source.source.tcp_address, .shape = source.shape, .kv_grant = spec.kv_grant});
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
    // The server sends each piece as (block, layer, K then V): the order in which SlabByteRanges
    // lists the slab's ranges.
    const std::vector<KvByteRange> ranges =
        SlabByteRanges(source.shape, dst_shape, slab, source.src_blocks, dst_blocks);
    pull.payload_bytes += TotalBytes(ranges);
    pull.ranges.insert(pull.ranges.end(), ranges.begin(), ranges.end());
  }
  return pulls;
}

KvWireRequest KvRequestHeader(const KvPoolShape& shape, std::string_view kv_grant, KvWireKind kind,
                              size_t num_pieces) {
  KvWireRequest request{.magic = kKvWireMagic,
                        .version = kKvWireVersion,
                        .num_pieces = static_cast<uint32_t>(num_pieces),
                        .num_layers = shape.num_layers,
                        .num_kv_heads = shape.num_kv_heads,
                        .head_dim = shape.head_dim,
                        .block_size = shape.block_size,
                        .dtype = KvDTypeCode(shape.dtype),
                        .kind = kind,
                        .grant = {}};
  std::memcpy(request.grant, kv_grant.data(), std::min(kv_grant.size(), sizeof(request.grant)));
  return request;
}

absl::StatusOr<std::vector<RankPull>> PlanRankPullsBefore(absl::Time deadline,
                                                         const KvPullSpec& spec,
                                                         const KvPoolShape& dst_shape,
                                                         std::span<const BlockId> dst_blocks) {
  std::vector<RankPull> pulls = PlanRankPulls(spec, dst_shape, dst_blocks);
  if (absl::Now() >= deadline) {
    return absl::DeadlineExceededError(absl::StrCat(
        "KV pull from ", pulls[0].address, ": deadline passed before connecting"));
  }
  return pulls;
}

absl::StatusOr<std::unique_ptr<RankPullGroup>> RankPullGroup::Create(int num_ranks,
                                                                     const KvPullWait& pull_wait) {
  UniqueFd cancel(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!cancel.valid()) return absl::InternalError("KV pull: cannot create an eventfd");
  return std::unique_ptr<RankPullGroup>(
      new RankPullGroup(num_ranks, pull_wait, std::move(cancel)));
}

void RankPullGroup::Fail(absl::Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!first_failure_.ok()) return;
  first_failure_ = std::move(status);
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = write(cancel_.get(), &one, sizeof(one));
  all_accepted_.notify_all();
}

absl::Status RankPullGroup::AcceptedAwaitOthers() {
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

absl::Status RankPullGroup::first_failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_failure_;
}

absl::Status RunRankPulls(
    std::span<const RankPull> pulls, const KvPullWait& wait,
    const std::function<absl::Status(const RankPull&, RankPullGroup&)>& pull_rank) {
  absl::StatusOr<std::unique_ptr<RankPullGroup>> group =
      RankPullGroup::Create(static_cast<int>(pulls.size()), wait);
  if (!group.ok()) return group.status();
  const auto run = [&pull_rank, &group = **group](const RankPull& pull) {
    if (absl::Status status = pull_rank(pull, group); !status.ok()) group.Fail(std::move(status));
  };
  std::vector<std::thread> threads;
  threads.reserve(pulls.size() - 1);
  for (size_t i = 1; i < pulls.size(); ++i) {
    try {
      threads.emplace_back(run, std::cref(pulls[i]));
    } catch (const std::system_error& e) {
      // The ranks without a thread never reach the barrier: those started are cancelled.
      (*group)->Fail(
          absl::InternalError(absl::StrCat("KV pull: cannot start a thread: ", e.what())));
      break;
    }
  }
  run(pulls[0]);
  for (std::thread& thread : threads) thread.join();
  return (*group)->first_failure();
}

absl::StatusOr<UniqueFd> ConnectKvServer(const std::string& address, const std::string& secret,
                                         const IoWait& wait) {
  absl::StatusOr<UniqueFd> fd = ConnectTcp(address, wait);
  if (!fd.ok()) return AnnotateKvPull(fd.status(), address);
  const KvWireHello hello{.magic = kKvWireMagic,
                          .version = kKvWireVersion,
                          .secret_bytes = static_cast<uint32_t>(secret.size()),
                          .reserved = 0};
  iovec iov[2] = {{.iov_base = const_cast<KvWireHello*>(&hello), .iov_len = sizeof(hello)},
                  {.iov_base = const_cast<char*>(secret.data()), .iov_len = secret.size()}};
  if (absl::Status status = SendAll(fd->get(), std::span<iovec>(iov, 2), wait); !status.ok()) {
    return AnnotateKvPull(status, address);
  }
  return fd;
}

absl::StatusOr<KvWireResponse> ExchangeKvRequest(int fd, std::span<iovec> request,
                                                 const IoWait& wait, const std::string& address) {
  if (absl::Status status = SendAll(fd, request, wait); !status.ok()) {
    return AnnotateKvPull(status, address);
  }
  KvWireResponse response{};
  if (absl::Status status = RecvAll(fd, &response, sizeof(response), wait); !status.ok()) {
    return AnnotateKvPull(status, address);
  }
  if (response.magic != kKvWireMagic) {
    return absl::InternalError(absl::StrCat("KV pull from ", address, ": bad response magic"));
  }
  if (response.status_code == 0) {
    if (response.message_bytes != 0) {
      return absl::InternalError(
          absl::StrCat("KV pull from ", address, ": malformed OK response"));
    }
    return response;
  }
  if (response.message_bytes > kMaxErrorMessageBytes || response.status_code < 0 ||
      response.status_code > static_cast<int32_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::InternalError(absl::StrCat("KV pull from ", address, ": malformed error response"));
  }
  std::string message(response.message_bytes, '\0');
  if (absl::Status status = RecvAll(fd, message.data(), message.size(), wait); !status.ok()) {
    return AnnotateKvPull(status, address);
  }
  return absl::Status(static_cast<absl::StatusCode>(response.status_code),
                      absl::StrCat("KV pull from ", address, ": ", message));
}

}  // namespace baton::runtime
