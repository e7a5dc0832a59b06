#include "scheduler/service/http_request_threads.h"

#include <utility>

namespace baton::scheduler {

bool RequestThreads::HasWorkOrStopping() const { return stopping_ || !queue_.empty(); }

void RequestThreads::JoinEnded() {
  for (auto it = threads_.begin(); it != threads_.end();) {
    if (it->ended) {
      it->thread.join();  // it has returned from Run, or is about to
      it = threads_.erase(it);
    } else {
      ++it;
    }
  }
}

void RequestThreads::Enqueue(std::function<void()> task) {
  absl::ReleasableMutexLock lock(&mu_);
  if (stopping_) {
    lock.Release();
    task();
    return;
  }
  JoinEnded();
  queue_.push_back(std::move(task));
  // Idle threads already woken for earlier tasks are not free for this one: compare with the queue.
  if (queue_.size() > num_idle_ && num_live_ < max_threads_) {
    Thread& thread = threads_.emplace_back();
    ++num_live_;
    thread.thread = std::thread([this, self = &thread] { Run(self); });
  }
}

void RequestThreads::Run(Thread* self) {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      ++num_idle_;
      mu_.AwaitWithTimeout(absl::Condition(this, &RequestThreads::HasWorkOrStopping), idle_timeout_);
      --num_idle_;
      if (queue_.empty()) {  // stopping with nothing left, or idle too long
        --num_live_;
        self->ended = true;
        return;
      }
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

void RequestThreads::Shutdown() {
  std::list<Thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  for (Thread& thread : threads) thread.thread.join();
}

size_t RequestThreads::num_threads() const {
  absl::MutexLock lock(&mu_);
  return num_live_;
}

}  // namespace baton::scheduler
