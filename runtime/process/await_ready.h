// AwaitReady: the start-up wait of a group of supervised processes — poll a readiness check until it
// passes, and give up at once when any child exits, when the deadline passes, or on a signal.
#pragma once

#include <signal.h>

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/process/process_supervisor.h"

namespace baton::runtime {

struct AwaitReadyOptions {
  absl::Duration timeout = absl::Seconds(120);         // from the call to the last probe
  absl::Duration poll_interval = absl::Milliseconds(100);  // between probes
  // Signals that interrupt the wait (blocked in every thread, see signals.h); null: none.
  const sigset_t* interrupt_signals = nullptr;
};

// Calls `probe` until it returns OK, then returns OK. Fails with
//   kAborted           "<child> exited with code 3 during start-up" when a supervised child exits
//                      first (that exit is consumed from the supervisor's queue);
//   kDeadlineExceeded  "not ready after 2s; last check: <probe's message>" after options.timeout;
//   kCancelled         "interrupted by SIGINT" when one of options.interrupt_signals arrives.
// `probe` should bound its own run time (an RPC deadline); it runs on the calling thread.
absl::Status AwaitReady(ProcessSupervisor& supervisor, const std::function<absl::Status()>& probe,
                        const AwaitReadyOptions& options);

}  // namespace baton::runtime
