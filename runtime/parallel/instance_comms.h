// InstanceComms: the communicators of one instance's tp x pp ranks (DESIGN.md, "Parallelism per
// phase"): one TP group per pipeline stage, one PP group per tp rank, each rank holding its member
// of both (rank = pp_rank * tp_size + tp_rank, stage-major).
//
// Two kinds, one place that picks (the communicator factory: with NCCL, the only file of
// runtime/parallel that tests BATON_HAS_NCCL):
//   - kInProcess: CpuCommGroup, for ranks whose buffers are host memory — CPU ranks, and
//     cuda-emulated ranks, whose device memory is host memory (DESIGN.md: NCCL through the CPU
//     communicator inside a process);
//   - kNccl: one NCCL communicator per rank and group on the rank's GPU (first_device + r), its
//     operations enqueued on the rank's compute stream so they follow the kernels that produced
//     their buffers. NCCL's init blocks until every member joins, so the ranks join on threads of
//     their own, concurrently; Create returns once all have (or the first failure, every wait
//     bounded by `timeout`). Unimplemented in builds without NCCL.
// Abort() aborts every group (from any thread), so a failed rank's peers stop waiting.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/parallel/communicator.h"
#include "runtime/parallel/cpu_communicator.h"

namespace baton::runtime {

enum class CommKind { kInProcess, kNccl };

struct InstanceCommsParams {
  CommKind kind = CommKind::kInProcess;
  int tp_size = 1;
  int pp_size = 1;
  // kNccl: rank r runs on CUDA device first_device + r, and enqueues on streams[r] (a
  // cudaStream_t as void*, which outlives the communicators; null: the communicator's own).
  int first_device = 0;
  std::vector<void*> streams;  // empty, or [tp_size * pp_size]
  absl::Duration timeout = absl::Seconds(60);  // longest wait of one call, init included
};

// The communicators rank r uses; null for a group of one (tp_size or pp_size == 1).
struct RankComms {
  Communicator* tp = nullptr;
  Communicator* pp = nullptr;
};

class InstanceComms {
 public:
  // InvalidArgument for sizes < 1 or a streams list of the wrong length; the kinds' own errors.
  static absl::StatusOr<std::unique_ptr<InstanceComms>> Create(const InstanceCommsParams& params);

  RankComms rank(int r) const {
    return RankComms{.tp = tp_.empty() ? nullptr : tp_[r].get(),
                     .pp = pp_.empty() ? nullptr : pp_[r].get()};
  }
  // Aborts every group: waiting ranks wake with Aborted, later calls fail. Thread-safe.
  void Abort(absl::string_view reason);

 private:
  InstanceComms() = default;
  absl::Status CreateInProcess(const InstanceCommsParams& params);
  absl::Status CreateNccl(const InstanceCommsParams& params);

  std::vector<std::shared_ptr<CpuCommGroup>> groups_;  // kInProcess
  std::vector<std::unique_ptr<Communicator>> tp_;      // [num_ranks], or empty when tp_size == 1
  std::vector<std::unique_ptr<Communicator>> pp_;      // [num_ranks], or empty when pp_size == 1
};

}  // namespace baton::runtime
