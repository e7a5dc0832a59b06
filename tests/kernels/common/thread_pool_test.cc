#include "kernels/common/thread_pool.h"

#include <atomic>
#include <vector>

#include "gtest/gtest.h"

namespace baton {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  for (int num_threads : {1, 2, 3, 5}) {
    ThreadPool pool(num_threads);
    for (int64_t n : {1, 2, 7, 100, 1001}) {
      std::vector<std::atomic<int>> hits(n);
      pool.ParallelFor(n, [&](int64_t begin, int64_t end, int thread_idx) {
        EXPECT_GE(thread_idx, 0);
        EXPECT_LT(thread_idx, num_threads);
        for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
    }
  }
}

TEST(ThreadPoolTest, ManyConsecutiveCallsDoNotLoseWork) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum = 0;
  for (int round = 0; round < 2000; ++round) {
    pool.ParallelFor(4, [&](int64_t begin, int64_t end, int) { sum += end - begin; });
  }
  EXPECT_EQ(sum.load(), 8000);
}

}  // namespace
}  // namespace baton
