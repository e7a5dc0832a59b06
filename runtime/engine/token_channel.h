// TokenChannel: hands one request's token outputs from the engine thread to the thread serving the
// request (an RPC handler). Push never blocks; Pop waits up to a deadline. Thread-safe.
#pragma once

#include <deque>

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

  // Moves the next item into *out and returns true, or returns false when the deadline passes
  // first. (Not an optional<StatusOr>: GCC 12 warns falsely about its inlined moves.)
  bool Pop(absl::Time deadline, absl::StatusOr<TokenOutput>* out) {
    absl::MutexLock lock(&mu_);
    auto ready = [this] { return !items_.empty(); };
    mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
    if (items_.empty()) return false;
    *out = std::move(items_.front());
    items_.pop_front();
    return true;
  }

 private:
  absl::Mutex mu_;
  std::deque<absl::StatusOr<TokenOutput>> items_ ABSL_GUARDED_BY(mu_);
};

}  // namespace baton::runtime
