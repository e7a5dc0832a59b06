#include "benchmarks/bench/client.h"

#include <utility>

namespace baton::bench {

void Cancellation::SetHook(std::function<void()> hook) {
  std::function<void()> run_now;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_) {
      run_now = std::move(hook);
    } else {
      hook_ = std::move(hook);
    }
  }
  if (run_now) run_now();
}

void Cancellation::ClearHook() {
  std::lock_guard<std::mutex> lock(mu_);
  hook_ = nullptr;
}

void Cancellation::Cancel() {
  // The hook runs under the lock so that ClearHook cannot return while it runs.
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  if (hook_) hook_();
}

bool Cancellation::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

}  // namespace baton::bench
