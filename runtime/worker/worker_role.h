// What a worker instance does: prefill for a hand-off, decode handed-off requests, or both phases.
// The one role type: the deployment config's sections, `baton worker --role`, the worker registry and
// the worker itself all use it (the wire enum v1::WorkerRole is converted in runtime/rpc/).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace baton::runtime {

enum class WorkerRole : uint8_t { kPrefill, kDecode, kColocated };

// "prefill" | "decode" | "colocated": the config section and the `--role` value.
const char* WorkerRoleName(WorkerRole role);
// InvalidArgument naming the accepted values for anything else.
absl::StatusOr<WorkerRole> ParseWorkerRole(absl::string_view name);
// "prefill worker 0": how logs, Health problems and the latency model name an instance.
std::string WorkerName(WorkerRole role, int instance_idx);

}  // namespace baton::runtime
