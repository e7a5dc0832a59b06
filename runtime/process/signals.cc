#include "runtime/process/signals.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace baton::runtime {

sigset_t MakeSignalSet(std::initializer_list<int> signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int signal : signals) sigaddset(&set, signal);
  return set;
}

void BlockSignals(const sigset_t& signals) { pthread_sigmask(SIG_BLOCK, &signals, nullptr); }

int WaitForSignal(const sigset_t& signals, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const timespec remaining = absl::ToTimespec(std::max(deadline - absl::Now(), absl::ZeroDuration()));
    const int signal = sigtimedwait(&signals, nullptr, &remaining);
    if (signal > 0) return signal;
    if (errno != EINTR) return 0;  // EAGAIN: timed out
  }
}

std::string SignalName(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev != nullptr ? absl::StrCat("SIG", abbrev) : absl::StrCat("signal ", signal);
}

}  // namespace baton::runtime
