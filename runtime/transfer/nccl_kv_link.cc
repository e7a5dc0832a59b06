#include "runtime/transfer/nccl_kv_link.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/nccl_check.h"
#include "kernels/common/status_macros.h"

namespace baton::runtime {
namespace {

static_assert(sizeof(ncclUniqueId) == sizeof(KvLinkId));

constexpr absl::Duration kPollInterval = absl::Microseconds(20);

// ncclInProgress is how a non-blocking communicator says "started".
ncclResult_t Started(ncclResult_t result) {
  return result == ncclInProgress ? ncclSuccess : result;
}

class NcclKvLink final : public KvLink {
 public:
  NcclKvLink(int rank, int device) : rank_(rank), device_(device) {}

  ~NcclKvLink() override {
    cudaSetDevice(device_);
    if (comm_ != nullptr) {
      if (broken_) {
        ncclCommAbort(comm_);
      } else {
        ncclCommDestroy(comm_);
      }
    }
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  absl::Status Init(const KvLinkId& id_bytes, absl::Time deadline) {
    BATON_CUDA_CALL(cudaSetDevice(device_));
    BATON_CUDA_CALL(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    ncclUniqueId id;
    std::memcpy(&id, id_bytes.data(), sizeof(id));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    RETURN_IF_ERROR(Check(Started(ncclCommInitRankConfig(&comm_, 2, id, rank_, &config)), "init"));
    return Wait(deadline, "init", /*stream_too=*/false);
  }

  absl::Status Send(std::span<const KvDeviceSpan> spans, absl::Time deadline) override {
    return Group(spans, deadline, /*send=*/true);
  }
  absl::Status Recv(std::span<const KvDeviceSpan> spans, absl::Time deadline) override {
    return Group(spans, deadline, /*send=*/false);
  }

 private:
  absl::Status Group(std::span<const KvDeviceSpan> spans, absl::Time deadline, bool send) {
    if (broken_) return absl::FailedPreconditionError("nccl link: broken by an earlier failure");
    const char* what = send ? "send" : "recv";
    BATON_CUDA_CALL(cudaSetDevice(device_));
    const int peer = 1 - rank_;
    RETURN_IF_ERROR(Check(Started(ncclGroupStart()), what));
    ncclResult_t result = ncclSuccess;
    for (const KvDeviceSpan& span : spans) {
      result = Started(send ? ncclSend(span.data, span.num_bytes, ncclUint8, peer, comm_, stream_)
                            : ncclRecv(span.data, span.num_bytes, ncclUint8, peer, comm_, stream_));
      if (result != ncclSuccess) break;
    }
    // The group is closed even after a failed call, so the communicator is left consistent.
    const ncclResult_t ended = Started(ncclGroupEnd());
    RETURN_IF_ERROR(Check(result, what));
    RETURN_IF_ERROR(Check(ended, what));
    return Wait(deadline, what, /*stream_too=*/true);
  }

  // An NCCL failure breaks the link.
  absl::Status Check(ncclResult_t result, const char* what) {
    if (result == ncclSuccess) return absl::OkStatus();
    broken_ = true;
    return absl::InternalError(absl::StrCat("nccl link: ", what, ": ", ncclGetErrorString(result),
                                            ": ", ncclGetLastError(comm_)));
  }

  // Polls the communicator (and the stream) until the enqueued work is done or the deadline.
  absl::Status Wait(absl::Time deadline, const char* what, bool stream_too) {
    for (;;) {
      ncclResult_t state = ncclSuccess;
      RETURN_IF_ERROR(Check(ncclCommGetAsyncError(comm_, &state), what));
      if (state != ncclSuccess && state != ncclInProgress) return Check(state, what);
      bool done = state == ncclSuccess;
      if (done && stream_too) {
        const cudaError_t error = cudaStreamQuery(stream_);
        if (error != cudaSuccess && error != cudaErrorNotReady) {
          broken_ = true;
          return absl::InternalError(
              absl::StrCat("nccl link: ", what, ": ", cudaGetErrorString(error)));
        }
        done = error == cudaSuccess;
      }
      if (done) return absl::OkStatus();
      if (absl::Now() > deadline) {
        broken_ = true;  // the destructor aborts the communicator, which ends the pending work
        return absl::DeadlineExceededError(
            absl::StrCat("nccl link: ", what, " did not complete by the deadline"));
      }
      absl::SleepFor(kPollInterval);
    }
  }

  const int rank_;
  const int device_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  bool broken_ = false;
};

class NcclKvLinkFactory final : public KvLinkFactory {
 public:
  std::string_view name() const override { return "nccl"; }

  absl::StatusOr<KvLinkId> NewId() override {
    ncclUniqueId id;
    BATON_NCCL_CALL(ncclGetUniqueId(&id));
    KvLinkId bytes;
    std::memcpy(bytes.data(), &id, sizeof(id));
    return bytes;
  }

  absl::StatusOr<std::unique_ptr<KvLink>> Join(const KvLinkId& id, int rank, int device,
                                               absl::Time deadline) override {
    if (rank != kKvLinkSenderRank && rank != kKvLinkReceiverRank) {
      return absl::InvalidArgumentError(absl::StrCat("nccl link: rank ", rank));
    }
    if (device < 0) {
      return absl::InvalidArgumentError(absl::StrCat("nccl link: device ", device));
    }
    auto link = std::make_unique<NcclKvLink>(rank, device);
    RETURN_IF_ERROR(link->Init(id, deadline));
    return link;
  }
};

}  // namespace

std::unique_ptr<KvLinkFactory> MakeNcclKvLinkFactory() {
  return std::make_unique<NcclKvLinkFactory>();
}

}  // namespace baton::runtime
