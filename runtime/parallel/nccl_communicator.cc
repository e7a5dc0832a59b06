#include "runtime/parallel/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/nccl_check.h"
#include "kernels/common/status_macros.h"

namespace baton::runtime {
namespace {

static_assert(sizeof(ncclUniqueId) == std::tuple_size_v<NcclUniqueId>);

// The communicator is non-blocking (config.blocking = 0): a call may return ncclInProgress, and its
// completion is polled with ncclCommGetAsyncError, so that no wait is unbounded.
ncclResult_t Started(ncclResult_t result) {
  return result == ncclInProgress ? ncclSuccess : result;
}

constexpr absl::Duration kPollInterval = absl::Microseconds(20);

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(const NcclCommunicatorParams& params)
      : rank_(params.rank),
        num_ranks_(params.num_ranks),
        device_(params.device),
        timeout_(params.timeout),
        stream_(static_cast<cudaStream_t>(params.stream)),
        owns_stream_(params.stream == nullptr) {}

  ~NcclCommunicator() override {
    // An aborted communicator was freed by ncclCommAbort (WaitComm aborts it on a timeout).
    if (comm_ != nullptr && !comm_aborted_) {
      cudaSetDevice(device_);
      if (Started(ncclCommFinalize(comm_)) == ncclSuccess &&
          WaitComm(absl::Now() + timeout_, "finalize").ok()) {
        ncclCommDestroy(comm_);
      } else if (!comm_aborted_) {
        ncclCommAbort(comm_);
      }
    }
    if (barrier_buffer_ != nullptr) cudaFree(barrier_buffer_);
    if (owns_stream_ && stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  absl::Status Init(const NcclUniqueId& unique_id) {
    BATON_CUDA_CALL(cudaSetDevice(device_));
    if (owns_stream_) {
      BATON_CUDA_CALL(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    }
    BATON_CUDA_CALL(cudaMalloc(reinterpret_cast<void**>(&barrier_buffer_), sizeof(float)));
    ncclUniqueId id;
    std::memcpy(&id, unique_id.data(), sizeof(id));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    BATON_NCCL_CALL(Started(ncclCommInitRankConfig(&comm_, num_ranks_, id, rank_, &config)));
    return WaitComm(absl::Now() + timeout_, "init");
  }

  int rank() const override { return rank_; }
  int size() const override { return num_ranks_; }

  using Communicator::AllReduceSum;
  absl::Status AllReduceSum(void* data, size_t count, DType dtype) override {
    ncclDataType_t nccl_type;
    switch (dtype) {
      case DType::kF32: nccl_type = ncclFloat32; break;
      case DType::kBF16: nccl_type = ncclBfloat16; break;
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            "rank ", rank_, ": all-reduce of ", std::string(DTypeName(dtype)),
            " (only f32 and bf16)"));
    }
    RETURN_IF_ERROR(Begin());
    BATON_NCCL_CALL(
        Started(ncclAllReduce(data, data, count, nccl_type, ncclSum, comm_, stream_)));
    return Complete("all-reduce");
  }

  absl::Status AllGather(const void* send, void* recv, size_t bytes_per_rank) override {
    RETURN_IF_ERROR(Begin());
    BATON_NCCL_CALL(
        Started(ncclAllGather(send, recv, bytes_per_rank, ncclInt8, comm_, stream_)));
    return Complete("all-gather");
  }

  absl::Status Broadcast(void* data, size_t bytes, int root) override {
    if (root < 0 || root >= num_ranks_) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank_, ": broadcast from root ",
                                                     root, " outside [0, ", num_ranks_, ")"));
    }
    RETURN_IF_ERROR(Begin());
    BATON_NCCL_CALL(Started(ncclBroadcast(data, data, bytes, ncclInt8, root, comm_, stream_)));
    return Complete("broadcast");
  }

  absl::Status Send(const void* data, size_t bytes, int peer) override {
    RETURN_IF_ERROR(CheckPeer(peer, "send to"));
    RETURN_IF_ERROR(Begin());
    BATON_NCCL_CALL(Started(ncclGroupStart()));
    const ncclResult_t result = Started(ncclSend(data, bytes, ncclInt8, peer, comm_, stream_));
    BATON_NCCL_CALL(Started(ncclGroupEnd()));
    BATON_NCCL_CALL(result);
    return Complete("send");
  }

  absl::Status Recv(void* data, size_t bytes, int peer) override {
    RETURN_IF_ERROR(CheckPeer(peer, "recv from"));
    RETURN_IF_ERROR(Begin());
    BATON_NCCL_CALL(Started(ncclGroupStart()));
    const ncclResult_t result = Started(ncclRecv(data, bytes, ncclInt8, peer, comm_, stream_));
    BATON_NCCL_CALL(Started(ncclGroupEnd()));
    BATON_NCCL_CALL(result);
    return Complete("recv");
  }

  // A one-element all-reduce: it completes on a rank only once every rank has joined it.
  absl::Status Barrier() override {
    RETURN_IF_ERROR(Begin());
    BATON_NCCL_CALL(Started(ncclAllReduce(barrier_buffer_, barrier_buffer_, 1, ncclFloat32,
                                          ncclSum, comm_, stream_)));
    return Complete("barrier");
  }

  void Abort(absl::string_view reason) override {
    absl::MutexLock lock(&abort_mu_);
    if (abort_reason_.empty()) abort_reason_ = absl::StrCat("rank ", rank_, ": ", reason);
    abort_requested_.store(true, std::memory_order_release);
  }

 private:
  absl::Status CheckPeer(int peer, const char* what) const {
    if (peer < 0 || peer >= num_ranks_) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank_, ": ", what, " rank ", peer,
                                                     " outside [0, ", num_ranks_, ")"));
    }
    return absl::OkStatus();
  }

  absl::Status AbortedStatus() {
    absl::MutexLock lock(&abort_mu_);
    return absl::AbortedError(absl::StrCat("communicator group aborted: ", abort_reason_));
  }

  // Aborts the NCCL communicator (once), which also ends its pending operations.
  void AbortComm(absl::string_view reason) {
    {
      absl::MutexLock lock(&abort_mu_);
      if (abort_reason_.empty()) abort_reason_ = std::string(reason);
    }
    abort_requested_.store(true, std::memory_order_release);
    if (!comm_aborted_ && comm_ != nullptr) {
      ncclCommAbort(comm_);
      comm_aborted_ = true;
    }
  }

  // Before enqueueing: the rank's device is current and the group is not aborted.
  absl::Status Begin() {
    if (abort_requested_.load(std::memory_order_acquire)) {
      AbortComm("aborted");
      return AbortedStatus();
    }
    BATON_CUDA_CALL(cudaSetDevice(device_));
    return absl::OkStatus();
  }

  // Waits until the communicator has no call in progress (non-blocking mode), up to `deadline`.
  absl::Status WaitComm(absl::Time deadline, const char* what) {
    while (true) {
      ncclResult_t state = ncclSuccess;
      BATON_NCCL_CALL(ncclCommGetAsyncError(comm_, &state));
      if (state == ncclSuccess) return absl::OkStatus();
      if (state != ncclInProgress) {
        BATON_NCCL_CALL(state);
      }
      RETURN_IF_ERROR(CheckWait(deadline, what));
      absl::SleepFor(kPollInterval);
    }
  }

  // Waits until the stream has run the enqueued operation, up to `deadline`.
  absl::Status WaitStream(absl::Time deadline, const char* what) {
    while (true) {
      const cudaError_t error = cudaStreamQuery(stream_);
      if (error == cudaSuccess) return absl::OkStatus();
      if (error != cudaErrorNotReady) {
        BATON_CUDA_CALL(error);
      }
      // An NCCL failure of a peer surfaces here rather than on the stream.
      ncclResult_t state = ncclSuccess;
      BATON_NCCL_CALL(ncclCommGetAsyncError(comm_, &state));
      if (state != ncclSuccess && state != ncclInProgress) {
        BATON_NCCL_CALL(state);
      }
      RETURN_IF_ERROR(CheckWait(deadline, what));
      absl::SleepFor(kPollInterval);
    }
  }

  absl::Status CheckWait(absl::Time deadline, const char* what) {
    if (abort_requested_.load(std::memory_order_acquire)) {
      AbortComm("aborted");
      return AbortedStatus();
    }
    if (absl::Now() > deadline) {
      AbortComm(absl::StrCat("rank ", rank_, " timed out in ", what));
      return absl::DeadlineExceededError(absl::StrCat("rank ", rank_, ": ", what,
                                                      " did not complete within ",
                                                      absl::FormatDuration(timeout_)));
    }
    return absl::OkStatus();
  }

  absl::Status Complete(const char* what) {
    const absl::Time deadline = absl::Now() + timeout_;
    RETURN_IF_ERROR(WaitComm(deadline, what));
    return WaitStream(deadline, what);
  }

  const int rank_;
  const int num_ranks_;
  const int device_;
  const absl::Duration timeout_;
  cudaStream_t stream_;
  const bool owns_stream_;
  ncclComm_t comm_ = nullptr;
  bool comm_aborted_ = false;          // ncclCommAbort was called (rank thread only)
  float* barrier_buffer_ = nullptr;    // [1] on the device
  std::atomic<bool> abort_requested_{false};
  absl::Mutex abort_mu_;
  std::string abort_reason_ ABSL_GUARDED_BY(abort_mu_);
};

}  // namespace

absl::StatusOr<NcclUniqueId> CreateNcclUniqueId() {
  ncclUniqueId id;
  BATON_NCCL_CALL(ncclGetUniqueId(&id));
  NcclUniqueId bytes;
  std::memcpy(bytes.data(), &id, sizeof(id));
  return bytes;
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    const NcclCommunicatorParams& params) {
  if (params.num_ranks < 1 || params.rank < 0 || params.rank >= params.num_ranks) {
    return absl::InvalidArgumentError(absl::StrCat("nccl communicator: rank ", params.rank,
                                                   " outside [0, ", params.num_ranks, ")"));
  }
  if (params.device < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl communicator: device ", params.device, " is negative"));
  }
  if (params.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nccl communicator: timeout ", absl::FormatDuration(params.timeout), " is not positive"));
  }
  auto comm = std::make_unique<NcclCommunicator>(params);
  RETURN_IF_ERROR(comm->Init(params.unique_id));
  return comm;
}

}  // namespace baton::runtime
