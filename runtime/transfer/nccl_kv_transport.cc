#include "runtime/transfer/nccl_kv_transport.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/transfer/rank_pulls.h"
#include "runtime/transfer/socket_io.h"
#include "runtime/transfer/tcp_wire.h"

namespace baton::runtime {

absl::StatusOr<std::unique_ptr<PooledKvLink>> NcclKvTransport::NewLink(const std::string& address,
                                                                       const KvPoolShape& shape,
                                                                       int device,
                                                                       absl::Time deadline) {
  const IoWait wait{.deadline = deadline};
  absl::StatusOr<UniqueFd> fd = ConnectKvServer(address, secret_, wait);
  if (!fd.ok()) return fd.status();
  KvWireRequest request = KvRequestHeader(shape, /*kv_grant=*/"", kKvWireJoinLink, 0);
  iovec iov{.iov_base = &request, .iov_len = sizeof(request)};
  absl::StatusOr<KvWireResponse> response =
      ExchangeKvRequest(fd->get(), std::span<iovec>(&iov, 1), wait, address);
  if (!response.ok()) return response.status();
  KvLinkId id{};
  if (response->payload_bytes != id.size()) {
    return absl::InternalError(absl::StrCat("KV pull from ", address, ": a link id of ",
                                            response->payload_bytes, " bytes"));
  }
  if (absl::Status status = RecvAll(fd->get(), id.data(), id.size(), wait); !status.ok()) {
    return AnnotateKvPull(status, address);
  }
  absl::StatusOr<std::unique_ptr<KvLink>> link =
      factory_->Join(id, kKvLinkReceiverRank, device, deadline);
  if (!link.ok()) return AnnotateKvPull(link.status(), address);
  num_links_joined_.fetch_add(1);
  return std::make_unique<PooledKvLink>(PooledKvLink{.address = address,
                                                     .device = device,
                                                     .control = std::move(*fd),
                                                     .link = *std::move(link)});
}

absl::Status NcclKvTransport::Pull(const KvPullSpec& spec, const KvPool& dst,
                                   std::span<const BlockId> dst_blocks, const KvPullWait& wait) {
  if (absl::Status status = ValidatePull(spec, dst, dst_blocks); !status.ok()) return status;
  const std::string kind(factory_->name());
  if (!dst.on_device()) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV pull over ", kind, ": the destination pool is in host memory"));
  }
  if (absl::Status status = CheckSourceKvLinks(spec, kind); !status.ok()) return status;
  if (absl::Status status = CheckSourceAddresses(spec, kind); !status.ok()) return status;
  if (dst_blocks.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<RankPull>> planned =
      PlanRankPullsBefore(wait.deadline, spec, dst.shape(), dst_blocks);
  if (!planned.ok()) return planned.status();
  const std::vector<RankPull>& pulls = *planned;

  std::byte* const dst_base = dst.BlockData(0);
  const int device = dst.device_ordinal();
  const auto pull_rank = [&](const RankPull& pull, RankPullGroup& group) -> absl::Status {
    std::vector<KvWireRange> ranges;
    std::vector<KvDeviceSpan> spans;
    ranges.reserve(pull.ranges.size());
    spans.reserve(pull.ranges.size());
    for (const KvByteRange& range : pull.ranges) {
      ranges.push_back(KvWireRange{.offset = range.src_offset, .num_bytes = range.num_bytes});
      spans.push_back(KvDeviceSpan{.data = dst_base + range.dst_offset,
                                   .num_bytes = static_cast<size_t>(range.num_bytes)});
    }
    KvWireRequest request = KvRequestHeader(pull.shape, pull.kv_grant, kKvWireOverLink, ranges.size());
    iovec iov[2] = {{.iov_base = &request, .iov_len = sizeof(request)},
                    {.iov_base = ranges.data(), .iov_len = ranges.size() * sizeof(KvWireRange)}};
    const IoWait wait = group.wait();

    // A warm link first; if its server has gone away meanwhile, once more on a fresh one.
    std::unique_ptr<PooledKvLink> link = links_.Take(pull.address, device, absl::Now());
    bool warm = link != nullptr;
    absl::StatusOr<KvWireResponse> response;
    for (;;) {
      if (link == nullptr) {
        absl::StatusOr<std::unique_ptr<PooledKvLink>> fresh =
            NewLink(pull.address, pull.shape, device, group.deadline());
        if (!fresh.ok()) return fresh.status();
        link = *std::move(fresh);
      }
      iovec scratch[2] = {iov[0], iov[1]};  // SendAll advances its iovecs
      response = ExchangeKvRequest(link->control.get(), std::span<iovec>(scratch, 2), wait,
                                   pull.address);
      if (response.ok() || !warm || !absl::IsUnavailable(response.status())) break;
      link.reset();
      warm = false;
    }
    if (!response.ok()) return response.status();
    if (response->payload_bytes != static_cast<uint64_t>(pull.payload_bytes)) {
      return absl::InternalError(absl::StrCat("KV pull from ", pull.address, ": server announced ",
                                              response->payload_bytes, " bytes, expected ",
                                              pull.payload_bytes));
    }
    // Past here the server is sending: any failure drops the link, which ends its send too.
    if (absl::Status status = group.AcceptedAwaitOthers(); !status.ok()) {
      return AnnotateKvPull(status, pull.address);
    }
    if (absl::Status status = link->link->Recv(spans, group.deadline()); !status.ok()) {
      return AnnotateKvPull(status, pull.address);
    }
    links_.Put(std::move(link), absl::Now());
    return absl::OkStatus();
  };
  if (absl::Status status = RunRankPulls(pulls, wait, pull_rank); !status.ok()) return status;
  int64_t bytes = 0;
  for (const RankPull& pull : pulls) bytes += pull.payload_bytes;
  num_bytes_received_.fetch_add(bytes);
  return absl::OkStatus();
}

}  // namespace baton::runtime
