#include "runtime/parallel/cpu_communicator.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "kernels/common/status_macros.h"

namespace baton::runtime {
namespace {

enum class CollectiveOp { kAllReduce, kAllGather, kBroadcast, kBarrier };

const char* OpName(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce: return "all-reduce";
    case CollectiveOp::kAllGather: return "all-gather";
    case CollectiveOp::kBroadcast: return "broadcast";
    case CollectiveOp::kBarrier: return "barrier";
  }
  return "?";
}

// What one rank brought to the collective in progress.
struct Post {
  CollectiveOp op = CollectiveOp::kBarrier;
  const void* data = nullptr;  // the rank's buffer (all-reduce: data; all-gather: send; broadcast)
  size_t size = 0;             // count (all-reduce) or bytes
  int param = 0;               // the dtype (all-reduce) or the root (broadcast)
};

// Elements per rank's reduce slice, rounded up to 16 (a cache line of f32) so slices do not share
// lines of the scratch buffer.
// How long a rank polls for the end of a barrier before it sleeps.
constexpr absl::Duration kSpin = absl::Microseconds(20);

size_t SliceLength(size_t count, int num_ranks) {
  const size_t per_rank = (count + num_ranks - 1) / num_ranks;
  return (per_rank + 15) / 16 * 16;
}

}  // namespace

class CpuCommGroupState {
 public:
  explicit CpuCommGroupState(const CpuCommGroupParams& params)
      : num_ranks_(params.num_ranks),
        timeout_(params.timeout),
        joined_(params.num_ranks, false),
        posts_(params.num_ranks),
        mailboxes_(static_cast<size_t>(params.num_ranks) * params.num_ranks),
        spin_(static_cast<unsigned>(params.num_ranks) <= std::thread::hardware_concurrency()) {}

  int num_ranks() const { return num_ranks_; }

  absl::Status MarkJoined(int rank) {
    absl::MutexLock lock(&mu_);
    if (rank < 0 || rank >= num_ranks_) {
      return absl::InvalidArgumentError(
          absl::StrCat("communicator group: rank ", rank, " outside [0, ", num_ranks_, ")"));
    }
    if (joined_[rank]) {
      return absl::FailedPreconditionError(
          absl::StrCat("communicator group: rank ", rank, " has already joined"));
    }
    joined_[rank] = true;
    return absl::OkStatus();
  }

  void Abort(absl::string_view reason) {
    absl::MutexLock lock(&mu_);
    AbortLocked(reason);
  }

  absl::Status AllReduceSum(int rank, void* data, size_t count, DType dtype) {
    if (dtype != DType::kF32 && dtype != DType::kBF16) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", rank, ": all-reduce of ", std::string(DTypeName(dtype)), " (only f32 and bf16)"));
    }
    const absl::Time deadline = absl::Now() + timeout_;
    if (num_ranks_ == 1) return CheckNotAborted();  // the sum of one rank is its data
    const size_t elem_bytes = DTypeBytes(dtype);
    const Post post{.op = CollectiveOp::kAllReduce, .data = data, .size = count,
                    .param = static_cast<int>(dtype)};
    RETURN_IF_ERROR(Arrive(rank, deadline, &post, [&]() -> absl::Status {
      RETURN_IF_ERROR(CheckPostsMatch());
      const size_t floats = (SliceLength(count, num_ranks_) * num_ranks_ * elem_bytes + 3) / 4;
      if (scratch_.size() < floats) scratch_.resize(floats);
      return absl::OkStatus();
    }));
    // Between the two barriers every rank reads all buffers and writes only its slice of scratch_;
    // scratch_ is resized only by the last arrival of a first barrier, when no rank reads it.
    const size_t slice = SliceLength(count, num_ranks_);
    const size_t begin = std::min(count, slice * rank);
    const size_t end = std::min(count, begin + slice);
    if (dtype == DType::kF32) {
      ReduceF32(begin, end);
    } else {
      ReduceBf16(begin, end);
    }
    RETURN_IF_ERROR(Arrive(rank, deadline, nullptr, [] { return absl::OkStatus(); }));
    std::memcpy(data, scratch_.data(), count * elem_bytes);
    return absl::OkStatus();
  }

  absl::Status AllGather(int rank, const void* send, void* recv, size_t bytes_per_rank) {
    const absl::Time deadline = absl::Now() + timeout_;
    const Post post{.op = CollectiveOp::kAllGather, .data = send, .size = bytes_per_rank};
    RETURN_IF_ERROR(Arrive(rank, deadline, &post, [&] { return CheckPostsMatch(); }));
    for (int r = 0; r < num_ranks_; ++r) {
      std::memcpy(static_cast<char*>(recv) + r * bytes_per_rank, posts_[r].data, bytes_per_rank);
    }
    // The send buffers stay untouched until every rank has copied them.
    return Arrive(rank, deadline, nullptr, [] { return absl::OkStatus(); });
  }

  absl::Status Broadcast(int rank, void* data, size_t bytes, int root) {
    if (root < 0 || root >= num_ranks_) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ": broadcast from root ", root,
                                                     " outside [0, ", num_ranks_, ")"));
    }
    const absl::Time deadline = absl::Now() + timeout_;
    const Post post{.op = CollectiveOp::kBroadcast, .data = data, .size = bytes, .param = root};
    RETURN_IF_ERROR(Arrive(rank, deadline, &post, [&] { return CheckPostsMatch(); }));
    if (rank != root) std::memcpy(data, posts_[root].data, bytes);
    return Arrive(rank, deadline, nullptr, [] { return absl::OkStatus(); });
  }

  absl::Status Barrier(int rank) {
    const absl::Time deadline = absl::Now() + timeout_;
    const Post post{.op = CollectiveOp::kBarrier};
    return Arrive(rank, deadline, &post, [&] { return CheckPostsMatch(); });
  }

  absl::Status Send(int rank, const void* data, size_t bytes, int peer) {
    RETURN_IF_ERROR(CheckPeer(rank, peer, "send to"));
    std::vector<char> message(bytes);
    if (bytes > 0) std::memcpy(message.data(), data, bytes);
    absl::MutexLock lock(&mu_);
    if (!abort_status_.ok()) return abort_status_;
    Mailbox(rank, peer).push_back(std::move(message));
    mail_cv_.SignalAll();
    return absl::OkStatus();
  }

  absl::Status Recv(int rank, void* data, size_t bytes, int peer) {
    RETURN_IF_ERROR(CheckPeer(rank, peer, "recv from"));
    const absl::Time deadline = absl::Now() + timeout_;
    std::vector<char> message;
    {
      absl::MutexLock lock(&mu_);
      std::deque<std::vector<char>>& box = Mailbox(peer, rank);
      while (box.empty() && abort_status_.ok()) {
        if (mail_cv_.WaitWithDeadline(&mu_, deadline) && box.empty() && abort_status_.ok()) {
          return absl::DeadlineExceededError(
              absl::StrCat("rank ", rank, ": recv of ", bytes, " bytes from rank ", peer,
                           ": nothing arrived within ", absl::FormatDuration(timeout_)));
        }
      }
      if (!abort_status_.ok()) return abort_status_;
      message = std::move(box.front());
      box.pop_front();
    }
    if (message.size() != bytes) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ": recv of ", bytes,
                                                     " bytes from rank ", peer, " matched a send of ",
                                                     message.size(), " bytes"));
    }
    if (bytes > 0) std::memcpy(data, message.data(), bytes);
    return absl::OkStatus();
  }

 private:
  absl::Status CheckNotAborted() {
    absl::MutexLock lock(&mu_);
    return abort_status_;
  }

  absl::Status CheckPeer(int rank, int peer, const char* what) const {
    if (peer < 0 || peer >= num_ranks_) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank, ": ", what, " rank ", peer, " outside [0, ", num_ranks_, ")"));
    }
    return absl::OkStatus();
  }

  std::deque<std::vector<char>>& Mailbox(int src, int dst) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return mailboxes_[static_cast<size_t>(src) * num_ranks_ + dst];
  }

  void AbortLocked(absl::string_view reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (abort_status_.ok()) {
      abort_status_ = absl::AbortedError(absl::StrCat("communicator group aborted: ", reason));
    }
    cv_.SignalAll();
    mail_cv_.SignalAll();
  }

  // Every rank must have posted the same collective with the same sizes. Called by the last
  // arrival, under mu_.
  absl::Status CheckPostsMatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const Post& first = posts_[0];
    for (int r = 1; r < num_ranks_; ++r) {
      const Post& post = posts_[r];
      if (post.op != first.op || post.size != first.size || post.param != first.param) {
        return absl::InvalidArgumentError(absl::StrCat(
            "collectives do not match: rank 0 called ", OpName(first.op), " (size ", first.size,
            ", param ", first.param, "), rank ", r, " called ", OpName(post.op), " (size ",
            post.size, ", param ", post.param, ")"));
      }
    }
    return absl::OkStatus();
  }

  // The group barrier, generation-counted. Posts `post` (if any) as this rank's part of the
  // collective, then waits until every rank has arrived. The last arrival runs `on_last` under mu_
  // before releasing the others; its error aborts the group (the last arrival gets the error, the
  // others Aborted). Waiting past `deadline` aborts the group and returns DeadlineExceeded.
  absl::Status Arrive(int rank, absl::Time deadline, const Post* post,
                      absl::FunctionRef<absl::Status()> on_last) {
    uint64_t generation;
    {
      absl::MutexLock lock(&mu_);
      if (!abort_status_.ok()) return abort_status_;
      if (post != nullptr) posts_[rank] = *post;
      generation = generation_;
      if (++num_arrived_ == num_ranks_) {
        if (absl::Status status = on_last(); !status.ok()) {
          AbortLocked(status.message());
          return status;
        }
        num_arrived_ = 0;
        ++generation_;
        completed_generation_.store(generation_, std::memory_order_release);
        cv_.SignalAll();
        return absl::OkStatus();
      }
    }
    // With a core per rank the others are usually microseconds away: poll briefly before sleeping
    // on the condition variable (a futex wake-up costs as much as the whole decode all-reduce).
    if (spin_) {
      const absl::Time spin_end = absl::Now() + kSpin;
      while (absl::Now() < spin_end) {
        if (completed_generation_.load(std::memory_order_acquire) != generation) {
          return absl::OkStatus();
        }
        std::this_thread::yield();
      }
    }
    absl::MutexLock lock(&mu_);
    while (generation_ == generation && abort_status_.ok()) {
      if (cv_.WaitWithDeadline(&mu_, deadline) && generation_ == generation &&
          abort_status_.ok()) {
        const int missing = num_ranks_ - num_arrived_;
        const std::string what = post != nullptr ? OpName(post->op) : "collective";
        AbortLocked(absl::StrCat("rank ", rank, " timed out in ", what));
        return absl::DeadlineExceededError(
            absl::StrCat("rank ", rank, ": ", what, ": ", missing, " of ", num_ranks_,
                         " ranks did not arrive within ", absl::FormatDuration(timeout_)));
      }
    }
    // A completed generation counts even if the group was aborted just after.
    if (generation_ != generation) return absl::OkStatus();
    return abort_status_;
  }

  // scratch[i] = ((x_0[i] + x_1[i]) + x_2[i]) + ..., for i in [begin, end).
  void ReduceF32(size_t begin, size_t end) {
    if (begin == end) return;
    float* out = scratch_.data() + begin;
    const size_t n = end - begin;
    std::memcpy(out, static_cast<const float*>(posts_[0].data) + begin, n * sizeof(float));
    for (int r = 1; r < num_ranks_; ++r) {
      const float* in = static_cast<const float*>(posts_[r].data) + begin;
      for (size_t i = 0; i < n; ++i) out[i] += in[i];
    }
  }

  // The same sum of the widened bf16 values in f32, rounded to bf16 once.
  void ReduceBf16(size_t begin, size_t end) {
    uint16_t* out = reinterpret_cast<uint16_t*>(scratch_.data());
    constexpr size_t kChunk = 256;
    float acc[kChunk];
    for (size_t chunk_begin = begin; chunk_begin < end; chunk_begin += kChunk) {
      const size_t n = std::min(kChunk, end - chunk_begin);
      const uint16_t* in0 = static_cast<const uint16_t*>(posts_[0].data) + chunk_begin;
      for (size_t i = 0; i < n; ++i) acc[i] = Bf16ToF32(in0[i]);
      for (int r = 1; r < num_ranks_; ++r) {
        const uint16_t* in = static_cast<const uint16_t*>(posts_[r].data) + chunk_begin;
        for (size_t i = 0; i < n; ++i) acc[i] += Bf16ToF32(in[i]);
      }
      for (size_t i = 0; i < n; ++i) out[chunk_begin + i] = F32ToBf16(acc[i]);
    }
  }

  const int num_ranks_;
  const absl::Duration timeout_;

  absl::Mutex mu_;
  absl::CondVar cv_;       // a barrier generation completed, or the group aborted
  absl::CondVar mail_cv_;  // a message arrived, or the group aborted
  absl::Status abort_status_ ABSL_GUARDED_BY(mu_);  // OK until aborted, then Aborted
  std::vector<bool> joined_ ABSL_GUARDED_BY(mu_);   // [num_ranks]
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;    // completed barriers
  int num_arrived_ ABSL_GUARDED_BY(mu_) = 0;        // ranks waiting in the current barrier
  // [num_ranks]; written under mu_ before a first barrier, read after it without mu_ (the barrier
  // orders the accesses).
  std::vector<Post> posts_;
  // The all-reduce result, [slice * num_ranks] elements as f32 or bf16; resized under mu_ by the
  // last arrival of an all-reduce's first barrier, otherwise accessed between barriers.
  std::vector<float> scratch_;
  std::vector<std::deque<std::vector<char>>> mailboxes_ ABSL_GUARDED_BY(mu_);  // [src * n + dst]
  // generation_, readable without mu_ by the ranks that poll for the end of a barrier.
  std::atomic<uint64_t> completed_generation_{0};
  const bool spin_;  // poll before sleeping in a barrier: only with at least a core per rank
};

namespace {

class CpuCommunicator final : public Communicator {
 public:
  CpuCommunicator(std::shared_ptr<CpuCommGroupState> group, int rank)
      : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->num_ranks(); }

  using Communicator::AllReduceSum;
  absl::Status AllReduceSum(void* data, size_t count, DType dtype) override {
    return group_->AllReduceSum(rank_, data, count, dtype);
  }
  absl::Status AllGather(const void* send, void* recv, size_t bytes_per_rank) override {
    return group_->AllGather(rank_, send, recv, bytes_per_rank);
  }
  absl::Status Broadcast(void* data, size_t bytes, int root) override {
    return group_->Broadcast(rank_, data, bytes, root);
  }
  absl::Status Send(const void* data, size_t bytes, int peer) override {
    return group_->Send(rank_, data, bytes, peer);
  }
  absl::Status Recv(void* data, size_t bytes, int peer) override {
    return group_->Recv(rank_, data, bytes, peer);
  }
  absl::Status Barrier() override { return group_->Barrier(rank_); }
  void Abort(absl::string_view reason) override {
    group_->Abort(absl::StrCat("rank ", rank_, ": ", reason));
  }

 private:
  const std::shared_ptr<CpuCommGroupState> group_;
  const int rank_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<CpuCommGroup>> CpuCommGroup::Create(
    const CpuCommGroupParams& params) {
  if (params.num_ranks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("communicator group: num_ranks ", params.num_ranks, " < 1"));
  }
  if (params.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "communicator group: timeout ", absl::FormatDuration(params.timeout), " is not positive"));
  }
  return std::shared_ptr<CpuCommGroup>(
      new CpuCommGroup(std::make_shared<CpuCommGroupState>(params)));
}

CpuCommGroup::CpuCommGroup(std::shared_ptr<CpuCommGroupState> state) : state_(std::move(state)) {}

absl::StatusOr<std::unique_ptr<Communicator>> CpuCommGroup::Join(int rank) {
  RETURN_IF_ERROR(state_->MarkJoined(rank));
  return std::make_unique<CpuCommunicator>(state_, rank);
}

void CpuCommGroup::Abort(absl::string_view reason) { state_->Abort(reason); }

int CpuCommGroup::num_ranks() const { return state_->num_ranks(); }

}  // namespace baton::runtime
