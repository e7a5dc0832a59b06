// RestartSchedule: when each supervised child that died should start again (`baton serve` brings
// its workers back this way).
//
// A child's first restart waits `initial`. Each further death of a child that ran less than
// `stable` doubles the wait, up to `max`, so a worker that cannot start (a bad device, a port some
// other process took) costs a start every `max` rather than a busy loop. A child that ran `stable`
// or longer, or that became ready since it started (Ready: it registered and serves), died of
// something new: its wait starts over at `initial`. Without the readiness rule a worker killed
// from outside every 20 s (a chaos test, `baton bench --fault`) waited 1, 2, 4 ... 30 s: down
// most of the time though it had started fine every time.
//
// Pure bookkeeping: it starts nothing and reads no clock. Not thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace baton::runtime {

struct RestartOptions {
  absl::Duration initial = absl::Seconds(1);
  absl::Duration max = absl::Seconds(30);
  absl::Duration stable = absl::Seconds(60);
};

class RestartSchedule {
 public:
  explicit RestartSchedule(RestartOptions options = {}) : options_(options) {}

  // `name` started at `at` (its first start or a restart).
  void Started(const std::string& name, absl::Time at);
  // `name`'s current run got as far as serving: its next death is not a crash loop.
  void Ready(const std::string& name);
  // `name` died at `at`; returns when it is due to start again. A name never Started counts as
  // started at `at`.
  absl::Time Died(const std::string& name, absl::Time at);
  // The children due at `now`, in name order; they leave the schedule until they die again.
  std::vector<std::string> TakeDue(absl::Time now);
  // The earliest time a child is due; absl::InfiniteFuture() when none waits.
  absl::Time NextDue() const;
  // How many times `name` died (and was scheduled for a restart) so far.
  int num_deaths(const std::string& name) const;

 private:
  struct Child {
    absl::Time started = absl::InfinitePast();
    absl::Duration wait = absl::ZeroDuration();  // before its last restart; zero before the first
    absl::Time due = absl::InfiniteFuture();     // InfiniteFuture while it runs
    bool ready = false;                          // since `started`
    int num_deaths = 0;
  };
  const RestartOptions options_;
  std::map<std::string, Child> children_;
};

}  // namespace baton::runtime
