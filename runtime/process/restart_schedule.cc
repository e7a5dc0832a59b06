#include "runtime/process/restart_schedule.h"

#include <algorithm>

namespace baton::runtime {

void RestartSchedule::Started(const std::string& name, absl::Time at) {
  Child& child = children_[name];
  child.started = at;
  child.due = absl::InfiniteFuture();
  child.ready = false;
}

void RestartSchedule::Ready(const std::string& name) {
  auto it = children_.find(name);
  if (it != children_.end() && it->second.due == absl::InfiniteFuture()) it->second.ready = true;
}

absl::Time RestartSchedule::Died(const std::string& name, absl::Time at) {
  Child& child = children_[name];
  if (child.started == absl::InfinitePast()) child.started = at;
  const bool crash_loop =
      child.wait > absl::ZeroDuration() && !child.ready && at - child.started < options_.stable;
  child.wait = crash_loop ? std::min(2 * child.wait, options_.max) : options_.initial;
  child.due = at + child.wait;
  ++child.num_deaths;
  return child.due;
}

std::vector<std::string> RestartSchedule::TakeDue(absl::Time now) {
  std::vector<std::string> due;
  for (auto& [name, child] : children_) {
    if (child.due <= now) {
      due.push_back(name);
      child.due = absl::InfiniteFuture();
    }
  }
  return due;
}

absl::Time RestartSchedule::NextDue() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [name, child] : children_) next = std::min(next, child.due);
  return next;
}

int RestartSchedule::num_deaths(const std::string& name) const {
  auto it = children_.find(name);
  return it == children_.end() ? 0 : it->second.num_deaths;
}

}  // namespace baton::runtime
