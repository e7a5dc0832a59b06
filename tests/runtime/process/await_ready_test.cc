#include "runtime/process/await_ready.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/process/signals.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;

class AwaitReadyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ready_file_ = std::filesystem::temp_directory_path() /
                  ("baton_await_ready_test_" + std::to_string(getpid()));
    std::filesystem::remove(ready_file_);
    absl::StatusOr<std::unique_ptr<ProcessSupervisor>> supervisor = ProcessSupervisor::Create();
    ASSERT_THAT(supervisor, IsOk());
    supervisor_ = *std::move(supervisor);
  }
  void TearDown() override {
    supervisor_.reset();
    std::filesystem::remove(ready_file_);
  }

  // Ready once the child has created the file.
  absl::Status ProbeFile() {
    ++num_probes_;
    if (std::filesystem::exists(ready_file_)) return absl::OkStatus();
    return absl::UnavailableError(ready_file_.string() + " not there yet");
  }

  void StartShell(const std::string& name, const std::string& script) {
    ASSERT_THAT(supervisor_->Start({.name = name, .argv = {"/bin/sh", "-c", script}}), IsOk());
  }

  std::filesystem::path ready_file_;
  std::unique_ptr<ProcessSupervisor> supervisor_;
  int num_probes_ = 0;
};

TEST_F(AwaitReadyTest, ReturnsOnceTheProbePasses) {
  StartShell("scheduler", "sleep 0.3; touch '" + ready_file_.string() + "'; sleep 30");
  StartShell("prefill worker 0", "sleep 30");
  const absl::Time start = absl::Now();
  EXPECT_THAT(AwaitReady(*supervisor_, [&] { return ProbeFile(); },
                         {.timeout = absl::Seconds(20), .poll_interval = absl::Milliseconds(20)}),
              IsOk());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(250));
  EXPECT_GT(num_probes_, 2) << "polled until the file appeared";
  EXPECT_EQ(supervisor_->num_running(), 2);
}

TEST_F(AwaitReadyTest, AChildThatDiesDuringStartUpFailsAtOnce) {
  StartShell("scheduler", "sleep 30");
  StartShell("decode worker 0", "sleep 0.2; exit 7");
  const absl::Time start = absl::Now();
  EXPECT_THAT(AwaitReady(*supervisor_, [&] { return ProbeFile(); },
                         {.timeout = absl::Seconds(20), .poll_interval = absl::Milliseconds(20)}),
              StatusIs(absl::StatusCode::kAborted,
                       testing::MatchesRegex(
                           "decode worker 0 \\(pid [0-9]+\\) exited with code 7 during start-up")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(AwaitReadyTest, AChildDeathWinsOverAPassingProbe) {
  StartShell("decode worker 0", "exit 1");
  // Give the exit time to be reaped, so it is queued when the probe passes.
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_THAT(AwaitReady(*supervisor_, [] { return absl::OkStatus(); }, {}),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("decode worker 0")));
}

TEST_F(AwaitReadyTest, TimesOutWithTheProbesLastMessage) {
  StartShell("scheduler", "sleep 30");
  EXPECT_THAT(AwaitReady(*supervisor_, [&] { return ProbeFile(); },
                         {.timeout = absl::Milliseconds(200), .poll_interval = absl::Milliseconds(20)}),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("not ready after 200ms; last check: " + ready_file_.string() +
                                 " not there yet")));
}

TEST_F(AwaitReadyTest, ASignalInterruptsTheWait) {
  const sigset_t signals = MakeSignalSet({SIGUSR1});
  BlockSignals(signals);
  StartShell("scheduler", "sleep 30");
  std::atomic<int> num_probes = 0;
  const absl::Status status = AwaitReady(
      *supervisor_,
      [&] {
        // The third probe "receives" Ctrl-C.
        if (++num_probes == 3) kill(getpid(), SIGUSR1);
        return absl::UnavailableError("not yet");
      },
      {.timeout = absl::Seconds(20), .poll_interval = absl::Milliseconds(20),
       .interrupt_signals = &signals});
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kCancelled, "interrupted by SIGUSR1"));
  EXPECT_EQ(num_probes, 3);
  EXPECT_EQ(WaitForSignal(signals, absl::ZeroDuration()), 0) << "the signal was consumed";
}

TEST(SignalsTest, WaitForSignalTimesOutAndNamesSignals) {
  const sigset_t signals = MakeSignalSet({SIGUSR2});
  BlockSignals(signals);
  const absl::Time start = absl::Now();
  EXPECT_EQ(WaitForSignal(signals, absl::Milliseconds(100)), 0);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(90));
  kill(getpid(), SIGUSR2);
  EXPECT_EQ(WaitForSignal(signals, absl::Seconds(5)), SIGUSR2);
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(SIGKILL), "SIGKILL");
}

}  // namespace
}  // namespace baton::runtime
