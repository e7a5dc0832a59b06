// Faults that `baton bench --fault` deals to a deployment during a run, and the record of each one
// dealt. The injector is fault_injector.h; the summary carries the records (summary.h).
#pragma once

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/worker/worker_role.h"

namespace baton::bench {

enum class FaultAction {
  kKill,    // SIGKILL: the worker dies at once, with whatever it held
  kFreeze,  // SIGSTOP: the worker stops answering but its sockets stay open
};

// "kill" | "freeze".
const char* FaultActionName(FaultAction action);

// Every `period` from the start of a run, one live worker of `role` gets `action`.
struct FaultSpec {
  runtime::WorkerRole role = runtime::WorkerRole::kDecode;
  FaultAction action = FaultAction::kKill;
  absl::Duration period = absl::Seconds(10);
};

// "ROLE:ACTION:PERIOD", e.g. "decode:kill:10s", "prefill:freeze:1m", "colocated:kill:30" (a bare
// number is seconds). InvalidArgument naming the part at fault; the period must be at least 1 s
// (a worker needs about that to be noticed dead and restarted).
absl::StatusOr<FaultSpec> ParseFaultSpec(absl::string_view text);
std::string FaultSpecString(const FaultSpec& spec);

// One fault the injector dealt, or tried to.
struct FaultEvent {
  double time_s = 0;   // since the start of the run
  std::string worker;  // "decode worker 1"; empty when no live worker of the role was found
  int pid = 0;
  FaultAction action = FaultAction::kKill;
  std::string error;   // empty: dealt; otherwise why not ("no live decode worker")
};

}  // namespace baton::bench
