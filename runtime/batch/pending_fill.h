// PendingFill: an input of a step that another thread is still writing when the step starts, and
// that the step waits for where it reads it (a structured output's token bitmask, filled while
// the forward pass runs: runtime/structured_output/sequence_constraints.h). One writer calls
// Done once; any number of readers Wait.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace baton::runtime {

class PendingFill {
 public:
  void Done() { done_.Notify(); }
  bool done() const { return done_.HasBeenNotified(); }
  // OK once filled; DeadlineExceeded when the writer has not finished within `timeout`.
  absl::Status Wait(absl::Duration timeout = absl::Seconds(60)) const {
    if (done_.WaitForNotificationWithTimeout(timeout)) return absl::OkStatus();
    return absl::DeadlineExceededError(
        absl::StrCat("a step input was not filled within ", absl::FormatDuration(timeout)));
  }

 private:
  absl::Notification done_;
};

}  // namespace baton::runtime
