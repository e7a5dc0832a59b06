#include "runtime/worker/worker_role.h"

#include "absl/strings/str_cat.h"

namespace baton::runtime {

const char* WorkerRoleName(WorkerRole role) {
  switch (role) {
    case WorkerRole::kPrefill: return "prefill";
    case WorkerRole::kDecode: return "decode";
    case WorkerRole::kColocated: return "colocated";
  }
  return "?";
}

absl::StatusOr<WorkerRole> ParseWorkerRole(absl::string_view name) {
  for (WorkerRole role : {WorkerRole::kPrefill, WorkerRole::kDecode, WorkerRole::kColocated}) {
    if (name == WorkerRoleName(role)) return role;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("role '", name, "' (expected prefill, decode or colocated)"));
}

std::string WorkerName(WorkerRole role, int instance_idx) {
  return absl::StrCat(WorkerRoleName(role), " worker ", instance_idx);
}

}  // namespace baton::runtime
