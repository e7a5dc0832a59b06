#include "runtime/transfer/tcp_transport.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/transfer/block_runs.h"
#include "runtime/transfer/socket_io.h"
#include "runtime/transfer/tcp_wire.h"

namespace baton::runtime {
namespace {

constexpr uint32_t kMaxErrorMessageBytes = 1 << 16;

absl::Status Annotate(const absl::Status& status, const std::string& address) {
  return absl::Status(status.code(),
                      absl::StrCat("KV pull from ", address, ": ", status.message()));
}

}  // namespace

absl::Status TcpKvTransport::Pull(const KvPullSpec& spec, const KvPool& dst,
                                  std::span<const BlockId> dst_blocks, absl::Time deadline) {
  if (absl::Status status = ValidatePull(spec, dst, dst_blocks); !status.ok()) return status;
  if (spec.resliced()) {
    // The wire protocol (tcp_wire.h) serves whole blocks of the server's pool only.
    return absl::InvalidArgumentError(
        "KV pull over TCP: re-slicing between TP/PP layouts is not supported by the TCP transport "
        "(whole blocks only); use shared memory on one host");
  }
  const std::string& address = spec.source.tcp_address;
  if (address.empty()) {
    return absl::InvalidArgumentError("KV pull over TCP: the source names no TCP address");
  }
  if (spec.src_blocks.empty()) return absl::OkStatus();
  if (absl::Now() >= deadline) {
    return absl::DeadlineExceededError(
        absl::StrCat("KV pull from ", address, ": deadline passed before connecting"));
  }

  const std::vector<BlockRun> runs = CoalesceBlockRuns(spec.src_blocks, dst_blocks);
  const KvWireRequest request{.magic = kKvWireMagic,
                              .version = kKvWireVersion,
                              .num_runs = static_cast<uint32_t>(runs.size()),
                              .num_layers = spec.shape.num_layers,
                              .num_kv_heads = spec.shape.num_kv_heads,
                              .head_dim = spec.shape.head_dim,
                              .block_size = spec.shape.block_size,
                              .reserved = 0};
  std::vector<KvWireRun> wire_runs;
  wire_runs.reserve(runs.size());
  for (const BlockRun& run : runs) {
    wire_runs.push_back(KvWireRun{.src_start = run.src_start, .num_blocks = run.num_blocks});
  }

  absl::StatusOr<UniqueFd> fd = ConnectTcp(address, deadline);
  if (!fd.ok()) return Annotate(fd.status(), address);
  const IoWait wait{.deadline = deadline};
  iovec request_iov[2] = {
      {.iov_base = const_cast<KvWireRequest*>(&request), .iov_len = sizeof(request)},
      {.iov_base = wire_runs.data(), .iov_len = wire_runs.size() * sizeof(KvWireRun)}};
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
  const size_t block_bytes = dst.BlockBytes();
  const uint64_t expected_bytes = static_cast<uint64_t>(block_bytes) * spec.src_blocks.size();
  if (response.payload_bytes != expected_bytes || response.message_bytes != 0) {
    return absl::InternalError(absl::StrCat("KV pull from ", address, ": server announced ",
                                            response.payload_bytes, " payload bytes, expected ",
                                            expected_bytes));
  }
  for (const BlockRun& run : runs) {
    if (absl::Status status = RecvAll(fd->get(), dst.BlockData(run.dst_start),
                                      block_bytes * static_cast<size_t>(run.num_blocks), wait);
        !status.ok()) {
      return Annotate(status, address);
    }
  }
  return absl::OkStatus();
}

}  // namespace baton::runtime
