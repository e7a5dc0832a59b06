#include "scheduler/service/http_task_queue.h"

#include <utility>

namespace baton::scheduler {

bool ConnectionThreads::HasWorkOrStopping() const { return stopping_ || !queue_.empty(); }

void ConnectionThreads::enqueue(std::function<void()> task) {
  absl::ReleasableMutexLock lock(&mu_);
  if (stopping_) {  // httplib enqueues nothing after shutdown; should it, the task still runs
    lock.Release();
    task();
    return;
  }
  queue_.push_back(std::move(task));
  // Idle threads already woken for earlier tasks are not free for this one: compare with the queue.
  if (queue_.size() > num_idle_ && threads_.size() < max_threads_) {
    threads_.emplace_back([this] { Run(); });
  }
}

void ConnectionThreads::Run() {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      ++num_idle_;
      mu_.Await(absl::Condition(this, &ConnectionThreads::HasWorkOrStopping));
      --num_idle_;
      if (queue_.empty()) return;  // stopping, nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

void ConnectionThreads::shutdown() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  for (std::thread& thread : threads) thread.join();
}

size_t ConnectionThreads::num_threads() const {
  absl::MutexLock lock(&mu_);
  return threads_.size();
}

}  // namespace baton::scheduler
