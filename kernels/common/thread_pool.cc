#include "kernels/common/thread_pool.h"

#include <algorithm>
#include <utility>

#include "kernels/common/cpu_affinity.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace baton {
namespace {

// About 50-100 microseconds of spinning before a worker goes to sleep.
constexpr int kSpinIterations = 20000;

inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

void RunChunk(const std::function<void(int64_t, int64_t, int)>& fn, int64_t n, int num_threads,
              int thread_idx) {
  const int64_t chunk = (n + num_threads - 1) / num_threads;
  const int64_t begin = std::min(n, chunk * thread_idx);
  const int64_t end = std::min(n, begin + chunk);
  if (begin < end) fn(begin, end, thread_idx);
}

}  // namespace

ThreadPool::ThreadPool(int num_threads, std::vector<int> cpus)
    : num_threads_(std::max(1, num_threads)), cpus_(std::move(cpus)) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stopping_.store(true);
  }
  work_ready_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  if (num_threads_ == 1 || n == 1) {
    fn(0, n, 0);
    return;
  }
  task_ = &fn;
  task_size_ = n;
  num_pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  {
    // Under the lock, so that a worker about to sleep either sees the new generation or is woken.
    std::lock_guard lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
    if (num_sleeping_ > 0) work_ready_.notify_all();
  }
  RunChunk(fn, n, num_threads_, 0);
  for (int spins = 0; num_pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kSpinIterations) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
  task_ = nullptr;
}

void ThreadPool::WorkerLoop(int thread_idx) {
  if (static_cast<size_t>(thread_idx) < cpus_.size()) (void)PinThisThread(cpus_[thread_idx]);
  uint64_t seen = 0;
  while (true) {
    uint64_t current = generation_.load(std::memory_order_acquire);
    for (int spins = 0; current == seen && spins < kSpinIterations; ++spins) {
      CpuRelax();
      current = generation_.load(std::memory_order_acquire);
    }
    if (current == seen) {
      std::unique_lock lock(mu_);
      ++num_sleeping_;
      work_ready_.wait(lock, [&] {
        return stopping_.load() || generation_.load(std::memory_order_acquire) != seen;
      });
      --num_sleeping_;
      if (stopping_.load()) return;
      current = generation_.load(std::memory_order_acquire);
    }
    if (stopping_.load()) return;
    seen = current;
    RunChunk(*task_, task_size_, num_threads_, thread_idx);
    num_pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace baton
