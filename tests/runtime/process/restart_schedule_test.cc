#include "runtime/process/restart_schedule.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);

RestartSchedule Schedule() {
  return RestartSchedule({.initial = absl::Seconds(1), .max = absl::Seconds(8), .stable = absl::Seconds(60)});
}

TEST(RestartScheduleTest, AChildThatDiedIsDueAfterTheInitialWaitAndOnlyOnce) {
  RestartSchedule schedule = Schedule();
  schedule.Started("decode worker 0", kT0);
  EXPECT_EQ(schedule.NextDue(), absl::InfiniteFuture());
  EXPECT_EQ(schedule.Died("decode worker 0", kT0 + absl::Seconds(100)), kT0 + absl::Seconds(101));
  EXPECT_EQ(schedule.NextDue(), kT0 + absl::Seconds(101));
  EXPECT_THAT(schedule.TakeDue(kT0 + absl::Seconds(100.5)), IsEmpty());
  EXPECT_THAT(schedule.TakeDue(kT0 + absl::Seconds(101)), ElementsAre("decode worker 0"));
  EXPECT_THAT(schedule.TakeDue(kT0 + absl::Seconds(200)), IsEmpty()) << "taken once";
  EXPECT_EQ(schedule.NextDue(), absl::InfiniteFuture());
  EXPECT_EQ(schedule.num_deaths("decode worker 0"), 1);
}

TEST(RestartScheduleTest, ACrashLoopDoublesTheWaitUpToTheMaximum) {
  RestartSchedule schedule = Schedule();
  absl::Time now = kT0;
  schedule.Started("w", now);
  std::vector<absl::Duration> waits;
  for (int i = 0; i < 6; ++i) {
    now += absl::Seconds(2);  // dies 2 s after each start
    const absl::Time due = schedule.Died("w", now);
    waits.push_back(due - now);
    now = due;
    ASSERT_THAT(schedule.TakeDue(now), ElementsAre("w"));
    schedule.Started("w", now);
  }
  EXPECT_THAT(waits, ElementsAre(absl::Seconds(1), absl::Seconds(2), absl::Seconds(4), absl::Seconds(8),
                                 absl::Seconds(8), absl::Seconds(8)));
  EXPECT_EQ(schedule.num_deaths("w"), 6);
}

TEST(RestartScheduleTest, AChildThatRanStableStartsOverAtTheInitialWait) {
  RestartSchedule schedule = Schedule();
  schedule.Started("w", kT0);
  absl::Time due = schedule.Died("w", kT0 + absl::Seconds(1));
  schedule.Started("w", due);
  due = schedule.Died("w", due + absl::Seconds(1));
  ASSERT_EQ(due - absl::Seconds(2), kT0 + absl::Seconds(3)) << "the second wait doubled";
  schedule.Started("w", due);
  EXPECT_EQ(schedule.Died("w", due + absl::Seconds(60)), due + absl::Seconds(61));
}

TEST(RestartScheduleTest, AChildKilledAfterItBecameReadyIsNotACrashLoop) {
  RestartSchedule schedule = Schedule();
  absl::Time now = kT0;
  schedule.Started("w", now);
  for (int i = 0; i < 4; ++i) {
    schedule.Ready("w");  // registered and served, then killed from outside 20 s in
    now += absl::Seconds(20);
    const absl::Time due = schedule.Died("w", now);
    EXPECT_EQ(due - now, absl::Seconds(1)) << "death " << i;
    now = due;
    ASSERT_THAT(schedule.TakeDue(now), ElementsAre("w"));
    schedule.Started("w", now);
  }
  // A run that never got ready is a crash loop again (the last wait, 1 s, doubles); readiness is
  // per run.
  const absl::Time due = schedule.Died("w", now + absl::Seconds(2));
  EXPECT_EQ(due - (now + absl::Seconds(2)), absl::Seconds(2));
  // Ready while it is down (its restart pending) is about no run: the next run starts unready.
  schedule.Ready("w");
  ASSERT_THAT(schedule.TakeDue(due), ElementsAre("w"));
  schedule.Started("w", due);
  EXPECT_EQ(schedule.Died("w", due + absl::Seconds(2)) - (due + absl::Seconds(2)), absl::Seconds(4));
}

TEST(RestartScheduleTest, ChildrenAreScheduledIndependently) {
  RestartSchedule schedule = Schedule();
  schedule.Started("a", kT0);
  schedule.Started("b", kT0);
  schedule.Died("b", kT0 + absl::Seconds(1));  // due at 2 s
  schedule.Started("b", kT0 + absl::Seconds(2));
  schedule.Died("b", kT0 + absl::Seconds(3));  // crash loop: due at 5 s
  schedule.Died("a", kT0 + absl::Seconds(3));  // due at 4 s
  EXPECT_EQ(schedule.NextDue(), kT0 + absl::Seconds(4));
  EXPECT_THAT(schedule.TakeDue(kT0 + absl::Seconds(4)), ElementsAre("a"));
  EXPECT_THAT(schedule.TakeDue(kT0 + absl::Seconds(5)), ElementsAre("b"));
  EXPECT_EQ(schedule.num_deaths("a"), 1);
  EXPECT_EQ(schedule.num_deaths("b"), 2);
  EXPECT_EQ(schedule.num_deaths("c"), 0);
}

TEST(RestartScheduleTest, AChildNeverStartedCountsAsStartedWhenItDied) {
  RestartSchedule schedule = Schedule();
  EXPECT_EQ(schedule.Died("w", kT0), kT0 + absl::Seconds(1));
  schedule.Started("w", kT0 + absl::Seconds(1));
  EXPECT_EQ(schedule.Died("w", kT0 + absl::Seconds(1)), kT0 + absl::Seconds(3)) << "a crash loop";
}

}  // namespace
}  // namespace baton::runtime
