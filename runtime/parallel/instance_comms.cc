#include "runtime/parallel/instance_comms.h"

#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#if BATON_HAS_NCCL
#include "runtime/parallel/nccl_communicator.h"
#endif

namespace baton::runtime {

absl::StatusOr<std::unique_ptr<InstanceComms>> InstanceComms::Create(
    const InstanceCommsParams& params) {
  if (params.tp_size < 1 || params.pp_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("instance comms: tp ", params.tp_size, " x pp ",
                                                   params.pp_size));
  }
  const int num_ranks = params.tp_size * params.pp_size;
  if (!params.streams.empty() && static_cast<int>(params.streams.size()) != num_ranks) {
    return absl::InvalidArgumentError(absl::StrCat("instance comms: ", params.streams.size(),
                                                   " streams for ", num_ranks, " ranks"));
  }
  std::unique_ptr<InstanceComms> comms(new InstanceComms());
  if (params.tp_size > 1) comms->tp_.resize(num_ranks);
  if (params.pp_size > 1) comms->pp_.resize(num_ranks);
  RETURN_IF_ERROR(params.kind == CommKind::kNccl ? comms->CreateNccl(params)
                                                 : comms->CreateInProcess(params));
  return comms;
}

absl::Status InstanceComms::CreateInProcess(const InstanceCommsParams& params) {
  const CpuCommGroupParams tp_params{.num_ranks = params.tp_size, .timeout = params.timeout};
  const CpuCommGroupParams pp_params{.num_ranks = params.pp_size, .timeout = params.timeout};
  std::vector<std::shared_ptr<CpuCommGroup>> tp_groups(tp_.empty() ? 0 : params.pp_size);
  std::vector<std::shared_ptr<CpuCommGroup>> pp_groups(pp_.empty() ? 0 : params.tp_size);
  for (auto& group : tp_groups) {
    ASSIGN_OR_RETURN(group, CpuCommGroup::Create(tp_params));
    groups_.push_back(group);
  }
  for (auto& group : pp_groups) {
    ASSIGN_OR_RETURN(group, CpuCommGroup::Create(pp_params));
    groups_.push_back(group);
  }
  for (int r = 0; r < params.tp_size * params.pp_size; ++r) {
    const int pp_rank = r / params.tp_size;
    const int tp_rank = r % params.tp_size;
    if (!tp_.empty()) {
      ASSIGN_OR_RETURN(tp_[r], tp_groups[pp_rank]->Join(tp_rank));
    }
    if (!pp_.empty()) {
      ASSIGN_OR_RETURN(pp_[r], pp_groups[tp_rank]->Join(pp_rank));
    }
  }
  return absl::OkStatus();
}

absl::Status InstanceComms::CreateNccl(const InstanceCommsParams& params) {
#if BATON_HAS_NCCL
  const int num_ranks = params.tp_size * params.pp_size;
  std::vector<NcclUniqueId> tp_ids(tp_.empty() ? 0 : params.pp_size);
  std::vector<NcclUniqueId> pp_ids(pp_.empty() ? 0 : params.tp_size);
  for (std::vector<NcclUniqueId>* ids : {&tp_ids, &pp_ids}) {
    for (NcclUniqueId& id : *ids) {
      ASSIGN_OR_RETURN(id, CreateNcclUniqueId());
    }
  }
  // Every rank joins its TP group, then its PP group: all members of a group join it in the same
  // phase, so no join waits on a rank that waits on another group.
  std::vector<absl::Status> statuses(num_ranks);
  const auto join = [&](int r) {
    const int pp_rank = r / params.tp_size;
    const int tp_rank = r % params.tp_size;
    const NcclCommunicatorParams base{
        .device = params.first_device + r,
        .stream = params.streams.empty() ? nullptr : params.streams[r],
        .timeout = params.timeout};
    if (!tp_.empty()) {
      NcclCommunicatorParams p = base;
      p.rank = tp_rank;
      p.num_ranks = params.tp_size;
      p.unique_id = tp_ids[pp_rank];
      absl::StatusOr<std::unique_ptr<Communicator>> comm = CreateNcclCommunicator(p);
      if (!comm.ok()) {
        statuses[r] = comm.status();
        return;
      }
      tp_[r] = *std::move(comm);
    }
    if (!pp_.empty()) {
      NcclCommunicatorParams p = base;
      p.rank = pp_rank;
      p.num_ranks = params.pp_size;
      p.unique_id = pp_ids[tp_rank];
      absl::StatusOr<std::unique_ptr<Communicator>> comm = CreateNcclCommunicator(p);
      if (!comm.ok()) {
        statuses[r] = comm.status();
        return;
      }
      pp_[r] = *std::move(comm);
    }
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < num_ranks; ++r) {
    try {
      threads.emplace_back(join, r);
    } catch (const std::system_error& e) {
      statuses[r] = absl::InternalError(absl::StrCat("instance comms: no thread: ", e.what()));
    }
  }
  for (std::thread& thread : threads) thread.join();
  for (int r = 0; r < num_ranks; ++r) {
    if (!statuses[r].ok()) {
      return absl::Status(statuses[r].code(),
                          absl::StrCat("rank ", r, ": NCCL: ", statuses[r].message()));
    }
  }
  return absl::OkStatus();
#else
  (void)params;
  return absl::UnimplementedError(
      "NCCL communicators between GPU ranks: this build has no NCCL (CUDA off)");
#endif
}

void InstanceComms::Abort(absl::string_view reason) {
  for (const auto& group : groups_) group->Abort(reason);
  if (!groups_.empty()) return;  // the in-process communicators abort through their groups
  for (const auto& comm : tp_) {
    if (comm != nullptr) comm->Abort(reason);
  }
  for (const auto& comm : pp_) {
    if (comm != nullptr) comm->Abort(reason);
  }
}

}  // namespace baton::runtime
