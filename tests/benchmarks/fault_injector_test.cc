#include "benchmarks/bench/fault_injector.h"

#include <signal.h>
#include <unistd.h>
#include <sys/wait.h>

#include <map>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace baton::bench {
namespace {

using runtime::WorkerRole;

TEST(ParseFaultSpecTest, ReadsRoleActionAndPeriod) {
  absl::StatusOr<FaultSpec> spec = ParseFaultSpec("decode:kill:10s");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->role, WorkerRole::kDecode);
  EXPECT_EQ(spec->action, FaultAction::kKill);
  EXPECT_EQ(spec->period, absl::Seconds(10));
  EXPECT_EQ(FaultSpecString(*spec), "decode:kill:10s");

  spec = ParseFaultSpec("prefill:freeze:1m30s");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->action, FaultAction::kFreeze);
  EXPECT_EQ(spec->period, absl::Seconds(90));

  spec = ParseFaultSpec("colocated:kill:2.5");  // bare seconds
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->period, absl::Milliseconds(2500));
}

TEST(ParseFaultSpecTest, RefusesWhatItCannotDeal) {
  for (const char* bad : {"decode:kill", "decode:kill:10s:x", "router:kill:10s", "decode:pause:10s",
                          "decode:kill:soon", "decode:kill:500ms", "decode:kill:-3", "decode:kill:nan",
                          ""}) {
    absl::StatusOr<FaultSpec> spec = ParseFaultSpec(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(spec.status())) << bad;
    EXPECT_NE(spec.status().message().find("--fault"), std::string::npos) << spec.status();
  }
}

// A registry of two decode workers and one prefill worker that records every signal.
struct FakeDeployment {
  absl::Mutex mu;
  std::vector<RegisteredWorker> workers = {
      {.role = WorkerRole::kPrefill, .instance_idx = 0, .pid = 100, .alive = true},
      {.role = WorkerRole::kDecode, .instance_idx = 0, .pid = 200, .alive = true},
      {.role = WorkerRole::kDecode, .instance_idx = 1, .pid = 201, .alive = true}};
  std::vector<std::pair<int, int>> signals;  // (pid, signal)

  WorkerLister Lister() {
    return [this]() -> absl::StatusOr<std::vector<RegisteredWorker>> {
      absl::MutexLock lock(&mu);
      return workers;
    };
  }
  WorkerSignaller Signaller() {
    return [this](const RegisteredWorker& worker, int signal) {
      absl::MutexLock lock(&mu);
      signals.push_back({worker.pid, signal});
      // A killed worker is cut off, as the scheduler would.
      for (RegisteredWorker& w : workers) {
        if (w.pid == worker.pid && signal == SIGKILL) w.alive = false;
      }
      return absl::OkStatus();
    };
  }
};

TEST(FaultInjectorTest, DealsEachSpecAtItsPeriodToALiveWorkerOfItsRole) {
  FakeDeployment deployment;
  FaultInjector injector({{.role = WorkerRole::kDecode, .action = FaultAction::kKill,
                           .period = absl::Milliseconds(100)}},
                         deployment.Lister(), deployment.Signaller(), /*seed=*/1);
  injector.Start();
  absl::SleepFor(absl::Milliseconds(350));
  const std::vector<FaultEvent> events = injector.Stop();
  // 100, 200, 300 ms: two decode workers to kill, then none left alive.
  ASSERT_EQ(events.size(), 3u);
  EXPECT_TRUE(events[0].error.empty()) << events[0].error;
  EXPECT_TRUE(events[1].error.empty()) << events[1].error;
  EXPECT_NE(events[0].pid, events[1].pid);
  for (const FaultEvent& event : {events[0], events[1]}) {
    EXPECT_TRUE(event.pid == 200 || event.pid == 201) << event.pid;
    EXPECT_EQ(event.worker, runtime::WorkerName(WorkerRole::kDecode, event.pid - 200));
  }
  EXPECT_EQ(events[2].error, "no live decode worker");
  EXPECT_NEAR(events[0].time_s, 0.1, 0.05);
  EXPECT_NEAR(events[1].time_s, 0.2, 0.05);
  absl::MutexLock lock(&deployment.mu);
  EXPECT_EQ(deployment.signals.size(), 2u);
}

TEST(FaultInjectorTest, StopWakesTheWorkersItFroze) {
  FakeDeployment deployment;
  FaultInjector injector({{.role = WorkerRole::kPrefill, .action = FaultAction::kFreeze,
                           .period = absl::Milliseconds(50)}},
                         deployment.Lister(), deployment.Signaller(), /*seed=*/1);
  injector.Start();
  absl::SleepFor(absl::Milliseconds(80));
  const std::vector<FaultEvent> events = injector.Stop();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].action, FaultAction::kFreeze);
  absl::MutexLock lock(&deployment.mu);
  ASSERT_EQ(deployment.signals.size(), 2u);
  EXPECT_EQ(deployment.signals[0], std::make_pair(100, SIGSTOP));
  EXPECT_EQ(deployment.signals[1], std::make_pair(100, SIGCONT));
}

TEST(FaultInjectorTest, AnUnreachableRegistryIsAnEventNotACrash) {
  FaultInjector injector({{.period = absl::Milliseconds(20)}},
                         [] { return absl::StatusOr<std::vector<RegisteredWorker>>(
                                  absl::UnavailableError("ListWorkers: connection refused")); },
                         [](const RegisteredWorker&, int) { return absl::OkStatus(); }, 0);
  injector.Start();
  absl::SleepFor(absl::Milliseconds(50));
  const std::vector<FaultEvent> events = injector.Stop();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].error, "ListWorkers: connection refused");
  EXPECT_TRUE(events[0].worker.empty());
}

TEST(FaultInjectorTest, StopsAtOnceWithNothingDue) {
  FakeDeployment deployment;
  FaultInjector injector({{.period = absl::Hours(1)}}, deployment.Lister(), deployment.Signaller(), 0);
  injector.Start();
  const absl::Time start = absl::Now();
  EXPECT_TRUE(injector.Stop().empty());
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
}

// The real signaller refuses a process that is not the worker it was told of.
TEST(SignalLocalWorkerTest, SignalsOnlyTheNamedWorkersProcess) {
  // This test binary is not a `baton worker`.
  const RegisteredWorker self{.role = WorkerRole::kDecode, .instance_idx = 0, .pid = getpid(), .alive = true};
  absl::Status status = SignalLocalWorker(self, 0);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;

  // A child whose command line is a decode worker 3's.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // python3 keeps the arguments after -c's program in its command line (sleep would refuse them).
    execlp("python3", "python3", "-c", "import time; time.sleep(30)", "worker", "--role", "decode",
           "--instance=3", nullptr);
    _exit(127);
  }
  // Until exec, the child's cmdline is this test's.
  RegisteredWorker worker{.role = WorkerRole::kDecode, .instance_idx = 3, .pid = child, .alive = true};
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  while (!SignalLocalWorker(worker, 0).ok() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(5));
  RegisteredWorker other_instance = worker;
  other_instance.instance_idx = 2;
  EXPECT_TRUE(absl::IsFailedPrecondition(SignalLocalWorker(other_instance, SIGKILL)));
  RegisteredWorker other_role = worker;
  other_role.role = WorkerRole::kPrefill;
  EXPECT_TRUE(absl::IsFailedPrecondition(SignalLocalWorker(other_role, SIGKILL)));
  EXPECT_TRUE(SignalLocalWorker(worker, SIGKILL).ok());
  int wait_status = 0;
  ASSERT_EQ(waitpid(child, &wait_status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL);
  EXPECT_TRUE(absl::IsNotFound(SignalLocalWorker(worker, 0)));
}

}  // namespace
}  // namespace baton::bench
