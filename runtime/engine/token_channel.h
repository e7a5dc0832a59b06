// TokenChannel: hands one request's token outputs from the engine thread to the thread serving the
// request (an RPC handler). Push never blocks; Pop waits up to a deadline. Thread-safe.
#pragma once

#include <deque>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/engine/engine.h"

namespace baton::runtime {

class TokenChannel {
 public:
  void Push(absl::StatusOr<TokenOutput> item) {
    absl::MutexLock lock(&mu_);
    items_.push_back(std::move(item));
  }

  // The next item, or nullopt when the deadline passes first.
  std::optional<absl::StatusOr<TokenOutput>> Pop(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto ready = [this] { return !items_.empty(); };
    mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
    if (items_.empty()) return std::nullopt;
    auto item = std::move(items_.front());
    items_.pop_front();
    return item;
  }

 private:
  absl::Mutex mu_;
  std::deque<absl::StatusOr<TokenOutput>> items_ ABSL_GUARDED_BY(mu_);
};

}  // namespace baton::runtime
