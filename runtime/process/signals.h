// Synchronous signal handling for supervising processes: the launcher blocks SIGINT/SIGTERM in every
// thread and waits for them where it chooses, instead of running asynchronous handlers.
#pragma once

#include <signal.h>

#include <initializer_list>
#include <string>

#include "absl/time/time.h"

namespace baton::runtime {

// The set holding exactly `signals`.
sigset_t MakeSignalSet(std::initializer_list<int> signals);

// Blocks `signals` in the calling thread; threads it creates afterwards inherit the mask. Call it
// before any thread exists (gRPC, ProcessSupervisor) so that no thread receives them asynchronously.
void BlockSignals(const sigset_t& signals);

// Waits up to `timeout` for one of `signals` (blocked in every thread) and consumes it. Returns the
// signal number, or 0 on timeout.
int WaitForSignal(const sigset_t& signals, absl::Duration timeout);

// "SIGTERM"; "signal 40" for one without a name.
std::string SignalName(int signal);

}  // namespace baton::runtime
