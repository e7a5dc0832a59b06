// How the CPU kernels spread work over a ThreadPool (which may be null: run inline).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "kernels/common/thread_pool.h"

namespace baton::kernels::internal {

// Below this many elementary operations, waking the pool costs more than it saves.
inline constexpr int64_t kMinParallelWork = 32 * 1024;

inline int NumThreads(const ThreadPool* pool) { return pool == nullptr ? 1 : pool->num_threads(); }

// Calls fn(begin, end, thread_idx) on contiguous chunks of [0, n); inline when `pool` is null or
// n * work_per_item is small.
template <typename Fn>
void ParallelChunks(ThreadPool* pool, int64_t n, int64_t work_per_item, Fn&& fn) {
  if (n <= 0) return;
  if (pool == nullptr || pool->num_threads() == 1 || n == 1 ||
      n * std::max<int64_t>(work_per_item, 1) < kMinParallelWork) {
    fn(int64_t{0}, n, 0);
    return;
  }
  pool->ParallelFor(n, fn);
}

// Calls fn(item, thread_idx) once per item in [0, n); items are handed out one at a time, so
// uneven items balance (order items from most to least expensive for best results).
template <typename Fn>
void ParallelItems(ThreadPool* pool, int64_t n, Fn&& fn) {
  if (n <= 0) return;
  const int num_threads = static_cast<int>(std::min<int64_t>(NumThreads(pool), n));
  if (num_threads == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i, 0);
    return;
  }
  std::atomic<int64_t> next{0};
  pool->ParallelFor(num_threads, [&](int64_t, int64_t, int thread_idx) {
    for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < n;
         i = next.fetch_add(1, std::memory_order_relaxed)) {
      fn(i, thread_idx);
    }
  });
}

}  // namespace baton::kernels::internal
