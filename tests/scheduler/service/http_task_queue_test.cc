// ConnectionThreads: every waiting connection gets a thread of its own (up to the cap), so that
// connections that hold their thread (slow clients) cannot starve the next one.
#include "scheduler/service/http_task_queue.h"

#include <atomic>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace baton::scheduler {
namespace {

TEST(ConnectionThreadsTest, HeldConnectionsDoNotStarveTheNext) {
  ConnectionThreads threads(/*max_threads=*/400);
  absl::Notification release;
  std::atomic<int> running = 0;
  constexpr int kSlowClients = 300;
  for (int i = 0; i < kSlowClients; ++i) {
    threads.enqueue([&] {
      ++running;
      release.WaitForNotificationWithTimeout(absl::Seconds(30));
    });
  }
  absl::Notification served;
  threads.enqueue([&] { served.Notify(); });
  EXPECT_TRUE(served.WaitForNotificationWithTimeout(absl::Seconds(10)))
      << "a connection waited behind " << kSlowClients << " held ones";
  release.Notify();
  threads.shutdown();
  EXPECT_EQ(running.load(), kSlowClients);
}

TEST(ConnectionThreadsTest, ReusesIdleThreadsAndStopsAtTheCap) {
  ConnectionThreads threads(/*max_threads=*/2);
  for (int round = 0; round < 20; ++round) {
    absl::Notification done;
    threads.enqueue([&] { done.Notify(); });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  }
  EXPECT_LE(threads.num_threads(), 2u);
  // Past the cap, tasks wait for a thread rather than being dropped.
  absl::Notification release;
  std::atomic<int> finished = 0;
  for (int i = 0; i < 6; ++i) {
    threads.enqueue([&] {
      release.WaitForNotificationWithTimeout(absl::Seconds(30));
      ++finished;
    });
  }
  EXPECT_EQ(threads.num_threads(), 2u);
  release.Notify();
  threads.shutdown();  // runs what is queued, then joins
  EXPECT_EQ(finished.load(), 6);
}

}  // namespace
}  // namespace baton::scheduler
