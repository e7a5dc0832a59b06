#include "runtime/process/await_ready.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/process/signals.h"

namespace baton::runtime {

absl::Status AwaitReady(ProcessSupervisor& supervisor, const std::function<absl::Status()>& probe,
                        const AwaitReadyOptions& options) {
  const absl::Time deadline = absl::Now() + options.timeout;
  while (true) {
    const absl::Status ready = probe();
    // An exit beats a passing probe: a child that died is not ready, whatever the probe saw.
    if (std::optional<ChildExit> exit = supervisor.WaitForExit(absl::ZeroDuration())) {
      return absl::AbortedError(absl::StrCat(exit->Describe(), " during start-up"));
    }
    if (ready.ok()) return absl::OkStatus();
    const absl::Duration remaining = deadline - absl::Now();
    if (remaining <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat("not ready after ",
                                                      absl::FormatDuration(options.timeout),
                                                      "; last check: ", ready.message()));
    }
    const absl::Duration pause = std::min(options.poll_interval, remaining);
    if (options.interrupt_signals != nullptr) {
      if (const int signal = WaitForSignal(*options.interrupt_signals, pause); signal > 0) {
        return absl::CancelledError(absl::StrCat("interrupted by ", SignalName(signal)));
      }
    } else if (std::optional<ChildExit> exit = supervisor.WaitForExit(pause)) {
      return absl::AbortedError(absl::StrCat(exit->Describe(), " during start-up"));
    }
  }
}

}  // namespace baton::runtime
