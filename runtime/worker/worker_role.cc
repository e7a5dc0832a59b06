#include "runtime/worker/worker_role.h"

namespace baton::runtime {

const char* WorkerRoleName(WorkerRole role) {
  switch (role) {
    case WorkerRole::kPrefill: return "prefill";
    case WorkerRole::kDecode: return "decode";
    case WorkerRole::kColocated: return "colocated";
  }
  return "?";
}

}  // namespace baton::runtime
