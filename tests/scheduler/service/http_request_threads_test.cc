// RequestThreads: every request being answered gets a thread of its own (up to the cap), so that
// connections that hold their thread (long completions) cannot starve the next one.
#include "scheduler/service/http_request_threads.h"

#include <atomic>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace baton::scheduler {
namespace {

TEST(RequestThreadsTest, LongRequestsDoNotStarveTheNext) {
  RequestThreads threads(/*max_threads=*/400);
  absl::Notification release;
  std::atomic<int> running = 0;
  constexpr int kSlowClients = 300;
  for (int i = 0; i < kSlowClients; ++i) {
    threads.Enqueue([&] {
      ++running;
      release.WaitForNotificationWithTimeout(absl::Seconds(30));
    });
  }
  absl::Notification served;
  threads.Enqueue([&] { served.Notify(); });
  EXPECT_TRUE(served.WaitForNotificationWithTimeout(absl::Seconds(10)))
      << "a request waited behind " << kSlowClients << " held ones";
  release.Notify();
  threads.Shutdown();
  EXPECT_EQ(running.load(), kSlowClients);
}

TEST(RequestThreadsTest, ReusesIdleThreadsAndStopsAtTheCap) {
  RequestThreads threads(/*max_threads=*/2);
  for (int round = 0; round < 20; ++round) {
    absl::Notification done;
    threads.Enqueue([&] { done.Notify(); });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  }
  EXPECT_LE(threads.num_threads(), 2u);
  // Past the cap, tasks wait for a thread rather than being dropped.
  absl::Notification release;
  std::atomic<int> finished = 0;
  for (int i = 0; i < 6; ++i) {
    threads.Enqueue([&] {
      release.WaitForNotificationWithTimeout(absl::Seconds(30));
      ++finished;
    });
  }
  EXPECT_EQ(threads.num_threads(), 2u);
  release.Notify();
  threads.Shutdown();  // runs what is queued, then joins
  EXPECT_EQ(finished.load(), 6);
}

// Issue 37, defect 10: a burst's threads stayed for good, their stacks and arenas resident.
TEST(RequestThreadsTest, IdleThreadsEnd) {
  RequestThreads threads(/*max_threads=*/16, /*idle_timeout=*/absl::Milliseconds(100));
  absl::Notification release;
  std::atomic<int> started = 0;
  for (int i = 0; i < 8; ++i) {
    threads.Enqueue([&] {
      ++started;
      release.WaitForNotificationWithTimeout(absl::Seconds(30));
    });
  }
  while (started.load() < 8) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(threads.num_threads(), 8u);
  release.Notify();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (threads.num_threads() > 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(threads.num_threads(), 0u);
  absl::Notification served;  // and a new task still gets a thread
  threads.Enqueue([&] { served.Notify(); });
  EXPECT_TRUE(served.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

}  // namespace
}  // namespace baton::scheduler
