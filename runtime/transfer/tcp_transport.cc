#include "runtime/transfer/tcp_transport.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/transfer/rank_pulls.h"
#include "runtime/transfer/socket_io.h"
#include "runtime/transfer/tcp_wire.h"

namespace baton::runtime {
namespace {

// One request/response exchange with one KvServer, the payload received into dst_base + ranges
// once every rank of `group` has been accepted.
absl::Status PullFromRank(const RankPull& pull, const std::string& secret, std::byte* dst_base,
                          RankPullGroup& group) {
  const std::string& address = pull.address;
  const IoWait wait = group.wait();
  absl::StatusOr<UniqueFd> fd = ConnectKvServer(address, secret, wait);
  if (!fd.ok()) return fd.status();

  const KvWireRequest request = KvRequestHeader(pull.shape, pull.kv_grant, kKvWireInline, pull.pieces.size());
  iovec request_iov[2] = {
      {.iov_base = const_cast<KvWireRequest*>(&request), .iov_len = sizeof(request)},
      {.iov_base = const_cast<KvWirePiece*>(pull.pieces.data()),
       .iov_len = pull.pieces.size() * sizeof(KvWirePiece)}};
  absl::StatusOr<KvWireResponse> response =
      ExchangeKvRequest(fd->get(), std::span<iovec>(request_iov, 2), wait, address);
  if (!response.ok()) return response.status();
  if (response->payload_bytes != static_cast<uint64_t>(pull.payload_bytes)) {
    return absl::InternalError(absl::StrCat("KV pull from ", address, ": server announced ",
                                            response->payload_bytes, " payload bytes, expected ",
                                            pull.payload_bytes));
  }
  if (absl::Status status = group.AcceptedAwaitOthers(); !status.ok()) {
    return AnnotateKvPull(status, address);
  }
  std::vector<iovec> iov;
  iov.reserve(pull.ranges.size());
  for (const KvByteRange& range : pull.ranges) {
    iov.push_back({.iov_base = dst_base + range.dst_offset,
                   .iov_len = static_cast<size_t>(range.num_bytes)});
  }
  if (absl::Status status = RecvAll(fd->get(), std::span<iovec>(iov), wait); !status.ok()) {
    return AnnotateKvPull(status, address);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status TcpKvTransport::Pull(const KvPullSpec& spec, const KvPool& dst,
                                  std::span<const BlockId> dst_blocks, const KvPullWait& wait) {
  if (absl::Status status = ValidatePull(spec, dst, dst_blocks); !status.ok()) return status;
  // Every address is checked before anything connects, so a bad one cannot leave a partial copy.
  if (absl::Status status = CheckSourceAddresses(spec, "TCP"); !status.ok()) return status;
  if (dst.on_device()) {
    return absl::InvalidArgumentError(
        "KV pull over TCP: the destination pool is in device memory (pull over a KV link)");
  }
  if (dst_blocks.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<RankPull>> planned =
      PlanRankPullsBefore(wait.deadline, spec, dst.shape(), dst_blocks);
  if (!planned.ok()) return planned.status();
  const std::vector<RankPull>& pulls = *planned;
  std::byte* const dst_base = dst.BlockData(0);
  if (absl::Status status = RunRankPulls(pulls, wait,
                                         [&](const RankPull& pull, RankPullGroup& group) {
                                           return PullFromRank(pull, secret_, dst_base, group);
                                         });
      !status.ok()) {
    return status;
  }
  int64_t bytes = 0;
  for (const RankPull& pull : pulls) bytes += pull.payload_bytes;
  num_bytes_received_.fetch_add(bytes, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace baton::runtime
