// RunWorkerServer: the body of a `baton worker` process. Loads the model, serves WorkerService on
// options.host:options.port, registers with the scheduler (when options.scheduler_address is set) and
// heartbeats its stats every heartbeat_interval, re-registering if the scheduler forgot it. Returns
// when *stop becomes true (after draining the gRPC server) or on a start-up error.
#pragma once

#include <atomic>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/worker/worker_options.h"

namespace baton::rpc {

absl::Status RunWorkerServer(const runtime::WorkerOptions& options, const std::atomic<bool>* stop,
                             absl::Duration heartbeat_interval = absl::Milliseconds(200));

}  // namespace baton::rpc
