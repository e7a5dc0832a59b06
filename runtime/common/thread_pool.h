// A fixed pool of worker threads for data-parallel loops in the CPU kernels.
//
// ParallelFor splits [0, n) into contiguous chunks, one per thread, and runs them with the caller as
// thread 0; it returns when every chunk is done. Not re-entrant: a task must not call ParallelFor on
// the same pool. One pool per engine (or per rank); calls from one thread at a time.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace baton {

class ThreadPool {
 public:
  // num_threads >= 1 counts the calling thread: a pool of 1 runs everything inline.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end, thread_idx) on disjoint chunks covering [0, n).
  void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  void WorkerLoop(int thread_idx);

  const int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(int64_t, int64_t, int)>* task_ = nullptr;  // guarded by mu_
  int64_t task_size_ = 0;
  uint64_t generation_ = 0;  // bumped per ParallelFor call
  int num_pending_ = 0;
  bool stopping_ = false;
};

}  // namespace baton
