#include "scheduler/service/call_watchdog.h"

#include <utility>

namespace baton::scheduler {

CallWatchdog::CallWatchdog(absl::Duration poll_interval)
    : poll_interval_(poll_interval), thread_([this] { Run(); }) {}

CallWatchdog::~CallWatchdog() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void CallWatchdog::Run() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    mu_.AwaitWithTimeout(absl::Condition(&stop_), poll_interval_);
    // Under the lock: a Watch removes its entry under it before its context goes away.
    for (auto& [id, entry] : entries_) {
      if (entry.fired || !entry.abandon()) continue;
      entry.fired = true;
      entry.context->TryCancel();
    }
  }
}

std::unique_ptr<CallWatchdog::Watch> CallWatchdog::Start(grpc::ClientContext* context,
                                                         std::function<bool()> abandon) {
  if (!abandon) return std::unique_ptr<Watch>(new Watch(nullptr, 0));
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  entries_.emplace(id, Entry{.context = context, .abandon = std::move(abandon)});
  return std::unique_ptr<Watch>(new Watch(this, id));
}

CallWatchdog::Watch::~Watch() {
  if (owner_ == nullptr) return;
  absl::MutexLock lock(&owner_->mu_);
  owner_->entries_.erase(id_);
}

bool CallWatchdog::Watch::fired() const {
  if (owner_ == nullptr) return false;
  absl::MutexLock lock(&owner_->mu_);
  auto it = owner_->entries_.find(id_);
  return it != owner_->entries_.end() && it->second.fired;
}

}  // namespace baton::scheduler
