// A fixed pool of worker threads for data-parallel loops in the CPU kernels.
//
// ParallelFor splits [0, n) into contiguous chunks, one per thread, and runs them with the caller as
// thread 0; it returns when every chunk is done. A decode step makes a few hundred such calls of a
// few microseconds each, so hand-off latency matters: idle workers spin for a short while before
// they sleep on a condition variable, and the caller spins while it waits for the last chunk.
// Not re-entrant: a task must not call ParallelFor on the same pool. Calls from one thread at a time.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace baton {

class ThreadPool {
 public:
  // num_threads >= 1 counts the calling thread: a pool of 1 runs everything inline. With `cpus`
  // ([num_threads]), worker i pins itself to cpus[i]; cpus[0] is the caller's, which the pool does
  // not own (its owner pins it, see cpu_affinity.h).
  explicit ThreadPool(int num_threads, std::vector<int> cpus = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end, thread_idx) on disjoint chunks covering [0, n).
  void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  void WorkerLoop(int thread_idx);

  const int num_threads_;
  const std::vector<int> cpus_;  // empty: unpinned
  std::vector<std::thread> workers_;
  // The current task; written before generation_ is bumped (release), read after (acquire).
  const std::function<void(int64_t, int64_t, int)>* task_ = nullptr;
  int64_t task_size_ = 0;
  std::atomic<uint64_t> generation_ = 0;  // bumped once per ParallelFor call
  std::atomic<int> num_pending_ = 0;      // worker chunks of the current call not yet done
  std::atomic<bool> stopping_ = false;
  std::mutex mu_;                          // guards sleeping on work_ready_
  std::condition_variable work_ready_;
  int num_sleeping_ = 0;                   // guarded by mu_
};

}  // namespace baton
