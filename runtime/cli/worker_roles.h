// The deployment config's instance roles as the runtime's worker roles (the same three kinds: the
// config layer names them for YAML, the runtime for processes).
#pragma once

#include "runtime/worker/worker_role.h"
#include "scheduler/config/deployment_config.h"

namespace baton::cli {

inline runtime::WorkerRole ToWorkerRole(scheduler::InstanceRole role) {
  switch (role) {
    case scheduler::InstanceRole::kPrefill: return runtime::WorkerRole::kPrefill;
    case scheduler::InstanceRole::kDecode: return runtime::WorkerRole::kDecode;
    case scheduler::InstanceRole::kColocated: return runtime::WorkerRole::kColocated;
  }
  return runtime::WorkerRole::kColocated;
}

}  // namespace baton::cli
