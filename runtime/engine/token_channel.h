// TokenChannel: hands one request's token outputs from the engine thread to the thread serving the
// request (an RPC handler). Push never blocks; Pop waits up to a deadline. Thread-safe.
//
// Backpressure: a consumer that stops taking outputs (its client does not read) lets them pile up.
// Push says when the backlog reaches kPauseBacklog (the producer then pauses the sequence:
// Engine::Pause), and Pop says when a paused channel's backlog is down to kResumeBacklog (the
// consumer then resumes it), each once per pause.
#pragma once

#include <deque>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/engine/engine.h"

namespace baton::runtime {

class TokenChannel {
 public:
  static constexpr size_t kPauseBacklog = 64;
  static constexpr size_t kResumeBacklog = 8;

  // True when this push makes the backlog kPauseBacklog: the consumer has fallen behind.
  bool Push(absl::StatusOr<TokenOutput> item) {
    absl::MutexLock lock(&mu_);
    items_.push_back(std::move(item));
    if (paused_ || items_.size() < kPauseBacklog) return false;
    paused_ = true;
    return true;
  }

  // Moves the next item into *out and returns true, or returns false when the deadline passes
  // first. (Not an optional<StatusOr>: GCC 12 warns falsely about its inlined moves.) *resume (when
  // given) turns true when the backlog of a channel Push said was behind is down to kResumeBacklog.
  bool Pop(absl::Time deadline, absl::StatusOr<TokenOutput>* out, bool* resume = nullptr) {
    absl::MutexLock lock(&mu_);
    auto ready = [this] { return !items_.empty(); };
    mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
    if (items_.empty()) return false;
    *out = std::move(items_.front());
    items_.pop_front();
    if (paused_ && items_.size() <= kResumeBacklog) {
      paused_ = false;
      if (resume != nullptr) *resume = true;
    }
    return true;
  }

 private:
  absl::Mutex mu_;
  std::deque<absl::StatusOr<TokenOutput>> items_ ABSL_GUARDED_BY(mu_);
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace baton::runtime
