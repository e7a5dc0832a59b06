#include "runtime/common/thread_pool.h"

#include <algorithm>

namespace baton {

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& worker : workers_) worker.join();
}

namespace {
void RunChunk(const std::function<void(int64_t, int64_t, int)>& fn, int64_t n, int num_threads,
              int thread_idx) {
  const int64_t chunk = (n + num_threads - 1) / num_threads;
  const int64_t begin = std::min(n, chunk * thread_idx);
  const int64_t end = std::min(n, begin + chunk);
  if (begin < end) fn(begin, end, thread_idx);
}
}  // namespace

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  if (num_threads_ == 1 || n == 1) {
    fn(0, n, 0);
    return;
  }
  {
    std::lock_guard lock(mu_);
    task_ = &fn;
    task_size_ = n;
    num_pending_ = num_threads_ - 1;
    ++generation_;
  }
  work_ready_.notify_all();
  RunChunk(fn, n, num_threads_, 0);
  std::unique_lock lock(mu_);
  work_done_.wait(lock, [this] { return num_pending_ == 0; });
  task_ = nullptr;
}

void ThreadPool::WorkerLoop(int thread_idx) {
  uint64_t seen_generation = 0;
  while (true) {
    const std::function<void(int64_t, int64_t, int)>* task;
    int64_t n;
    {
      std::unique_lock lock(mu_);
      work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen_generation; });
      if (stopping_) return;
      seen_generation = generation_;
      task = task_;
      n = task_size_;
    }
    RunChunk(*task, n, num_threads_, thread_idx);
    {
      std::lock_guard lock(mu_);
      if (--num_pending_ == 0) work_done_.notify_one();
    }
  }
}

}  // namespace baton
