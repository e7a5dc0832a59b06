#include "runtime/process/process_supervisor.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/check.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;

std::unique_ptr<ProcessSupervisor> NewSupervisor() {
  absl::StatusOr<std::unique_ptr<ProcessSupervisor>> supervisor = ProcessSupervisor::Create();
  BATON_CHECK(supervisor.ok());
  return *std::move(supervisor);
}

ChildSpec Shell(std::string name, std::string script) {
  return ChildSpec{.name = std::move(name), .argv = {"/bin/sh", "-c", std::move(script)}};
}

bool ProcessGone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

// Polls until `path` holds a line (the child wrote it), for up to 10 s.
std::string WaitForLine(const std::filesystem::path& path) {
  for (int i = 0; i < 1000; ++i) {
    std::ifstream in(path);
    std::string line;
    if (std::getline(in, line) && in.good()) return line;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return "";
}

class ProcessSupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("baton_supervisor_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(ProcessSupervisorTest, ReportsExitCode) {
  auto supervisor = NewSupervisor();
  absl::StatusOr<pid_t> pid = supervisor->Start(Shell("prefill worker 0", "exit 3"));
  ASSERT_THAT(pid, IsOk());
  std::optional<ChildExit> exit = supervisor->WaitForExit(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->pid, *pid);
  EXPECT_EQ(exit->name, "prefill worker 0");
  EXPECT_EQ(exit->exit_code, 3);
  EXPECT_EQ(exit->signal, 0);
  EXPECT_FALSE(exit->stop_requested);
  EXPECT_EQ(exit->Describe(), "prefill worker 0 (pid " + std::to_string(*pid) + ") exited with code 3");
  EXPECT_EQ(supervisor->num_running(), 0) << "an exited child is not restarted";
  EXPECT_FALSE(supervisor->WaitForExit(absl::Milliseconds(50)).has_value());
}

TEST_F(ProcessSupervisorTest, ReportsKillSignal) {
  auto supervisor = NewSupervisor();
  absl::StatusOr<pid_t> pid = supervisor->Start({.name = "decode worker 1", .argv = {"/bin/sleep", "30"}});
  ASSERT_THAT(pid, IsOk());
  EXPECT_EQ(supervisor->num_running(), 1);
  ASSERT_EQ(kill(*pid, SIGKILL), 0);
  std::optional<ChildExit> exit = supervisor->WaitForExit(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->pid, *pid);
  EXPECT_EQ(exit->signal, SIGKILL);
  EXPECT_EQ(exit->exit_code, -1);
  EXPECT_THAT(exit->Describe(), HasSubstr("was killed by signal 9 (SIGKILL)"));
  EXPECT_EQ(supervisor->num_running(), 0);
}

TEST_F(ProcessSupervisorTest, KillEndsAStoppedChild) {
  auto supervisor = NewSupervisor();
  absl::StatusOr<pid_t> pid = supervisor->Start({.name = "decode worker 0", .argv = {"/bin/sleep", "30"}});
  ASSERT_THAT(pid, IsOk());
  ASSERT_EQ(kill(*pid, SIGSTOP), 0);  // frozen: a SIGTERM would wait for a SIGCONT
  supervisor->Kill(*pid);
  std::optional<ChildExit> exit = supervisor->WaitForExit(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->pid, *pid);
  EXPECT_EQ(exit->signal, SIGKILL);
  EXPECT_FALSE(exit->stop_requested) << "killed as a failure, not stopped";
  supervisor->Kill(*pid);  // no longer running: nothing
  EXPECT_EQ(supervisor->num_running(), 0);
}

TEST_F(ProcessSupervisorTest, QueuesExitsInTheOrderTheyHappen) {
  auto supervisor = NewSupervisor();
  ASSERT_THAT(supervisor->Start(Shell("slow", "sleep 0.3; exit 2")), IsOk());
  ASSERT_THAT(supervisor->Start(Shell("fast", "exit 1")), IsOk());
  std::optional<ChildExit> first = supervisor->WaitForExit(absl::Seconds(10));
  std::optional<ChildExit> second = supervisor->WaitForExit(absl::InfiniteDuration());
  ASSERT_TRUE(first.has_value() && second.has_value());
  EXPECT_EQ(first->name, "fast");
  EXPECT_EQ(first->exit_code, 1);
  EXPECT_EQ(second->name, "slow");
  EXPECT_EQ(second->exit_code, 2);
}

TEST_F(ProcessSupervisorTest, StopAllSendsSigtermAndReapsEverything) {
  auto supervisor = NewSupervisor();
  std::set<pid_t> pids;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<pid_t> pid = supervisor->Start({.name = "sleeper", .argv = {"/bin/sleep", "30"}});
    ASSERT_THAT(pid, IsOk());
    pids.insert(*pid);
  }
  const absl::Time start = absl::Now();
  std::vector<ChildExit> stopped = supervisor->StopAll(absl::Seconds(10));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "sleep dies on SIGTERM; no grace needed";
  ASSERT_EQ(stopped.size(), 3u);
  for (const ChildExit& exit : stopped) {
    EXPECT_EQ(pids.count(exit.pid), 1u);
    EXPECT_EQ(exit.signal, SIGTERM);
    EXPECT_TRUE(exit.stop_requested);
    EXPECT_TRUE(ProcessGone(exit.pid)) << "reaped, not a zombie";
  }
  EXPECT_EQ(supervisor->num_running(), 0);
  int queued = 0;
  while (supervisor->WaitForExit(absl::ZeroDuration()).has_value()) ++queued;
  EXPECT_EQ(queued, 3);
}

TEST_F(ProcessSupervisorTest, StopAllEscalatesToSigkillAfterTheGracePeriod) {
  auto supervisor = NewSupervisor();
  const std::filesystem::path out = dir_ / "stubborn.out";
  // The shell and its sleep both ignore SIGTERM; "ready" says the trap is in place.
  absl::StatusOr<pid_t> pid = supervisor->Start(
      {.name = "stubborn", .argv = {"/bin/sh", "-c", "trap '' TERM; echo ready; sleep 30; exit 0"},
       .stdout_path = out});
  ASSERT_THAT(pid, IsOk());
  ASSERT_EQ(WaitForLine(out), "ready");
  const absl::Time start = absl::Now();
  std::vector<ChildExit> stopped = supervisor->StopAll(absl::Milliseconds(300));
  const absl::Duration elapsed = absl::Now() - start;
  EXPECT_GE(elapsed, absl::Milliseconds(300));
  EXPECT_LT(elapsed, absl::Seconds(5));
  ASSERT_EQ(stopped.size(), 1u);
  EXPECT_EQ(stopped[0].pid, *pid);
  EXPECT_EQ(stopped[0].signal, SIGKILL);
}

TEST_F(ProcessSupervisorTest, StopAllReachesGrandchildrenThroughTheProcessGroup) {
  auto supervisor = NewSupervisor();
  const std::filesystem::path out = dir_ / "grandchild.out";
  ASSERT_THAT(supervisor->Start({.name = "parent",
                                 .argv = {"/bin/sh", "-c", "sleep 30 & echo $!; wait"},
                                 .stdout_path = out}),
              IsOk());
  const std::string grandchild = WaitForLine(out);
  ASSERT_FALSE(grandchild.empty());
  const pid_t grandchild_pid = std::stoi(grandchild);
  supervisor->StopAll(absl::Seconds(5));
  // The grandchild is not ours to reap: it may linger as a zombie of init for a moment.
  bool gone = false;
  for (int i = 0; i < 500 && !gone; ++i) {
    std::ifstream stat("/proc/" + grandchild + "/stat");
    std::string pid_field, comm, state;
    gone = !(stat >> pid_field >> comm >> state) || state == "Z";
    if (!gone) absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(gone) << "grandchild " << grandchild_pid << " survived StopAll";
}

TEST_F(ProcessSupervisorTest, ChildOutputCanBeRedirected) {
  auto supervisor = NewSupervisor();
  const std::filesystem::path out = dir_ / "out.txt";
  const std::filesystem::path err = dir_ / "err.txt";
  ASSERT_THAT(supervisor->Start({.name = "echo",
                                 .argv = {"/bin/sh", "-c", "echo to-stdout; echo to-stderr >&2"},
                                 .stdout_path = out,
                                 .stderr_path = err}),
              IsOk());
  ASSERT_TRUE(supervisor->WaitForExit(absl::Seconds(10)).has_value());
  std::stringstream out_text, err_text;
  out_text << std::ifstream(out).rdbuf();
  err_text << std::ifstream(err).rdbuf();
  EXPECT_EQ(out_text.str(), "to-stdout\n");
  EXPECT_EQ(err_text.str(), "to-stderr\n");
}

TEST_F(ProcessSupervisorTest, ChildStartsWithDefaultSignalsAndItsOwnProcessGroup) {
  // The parent ignores SIGTERM and blocks SIGINT; neither may leak into the child.
  struct sigaction ignore = {}, previous = {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGTERM, &ignore, &previous);
  sigset_t blocked, old_mask;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGINT);
  pthread_sigmask(SIG_BLOCK, &blocked, &old_mask);
  auto supervisor = NewSupervisor();
  const std::filesystem::path out = dir_ / "status.txt";
  absl::StatusOr<pid_t> pid = supervisor->Start(
      {.name = "inspect",
       .argv = {"/bin/sh", "-c", "grep -E '^(SigBlk|SigIgn)' /proc/self/status; echo pgid=$(cut -d' ' -f5 /proc/$$/stat)"},
       .stdout_path = out});
  sigaction(SIGTERM, &previous, nullptr);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ASSERT_THAT(pid, IsOk());
  std::optional<ChildExit> exit = supervisor->WaitForExit(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value());
  std::stringstream text;
  text << std::ifstream(out).rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("SigBlk:\t0000000000000000"));
  // SIGTERM is bit 14 (value 0x4000): it must not be ignored.
  std::string ignored = text.str().substr(text.str().find("SigIgn:\t") + 8, 16);
  EXPECT_EQ(std::stoull(ignored, nullptr, 16) & (1ull << (SIGTERM - 1)), 0u) << text.str();
  EXPECT_THAT(text.str(), HasSubstr("pgid=" + std::to_string(*pid))) << "process group id == child pid";
}

TEST_F(ProcessSupervisorTest, StartFailuresLeaveNoChild) {
  auto supervisor = NewSupervisor();
  EXPECT_THAT(supervisor->Start({.name = "missing", .argv = {"/nonexistent/baton"}}),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("missing: cannot execute /nonexistent/baton: No such file")));
  EXPECT_THAT(supervisor->Start({.name = "dir", .argv = {"/tmp"}}),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("cannot execute /tmp")));
  EXPECT_THAT(supervisor->Start({.name = "empty"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty argv")));
  EXPECT_THAT(supervisor->Start({.name = "relative", .argv = {"sleep", "1"}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must be a path")));
  EXPECT_THAT(supervisor->Start({.name = "redirect",
                                 .argv = {"/bin/true"},
                                 .stdout_path = "/nonexistent/dir/out.txt"}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("cannot open /nonexistent/dir")));
  EXPECT_EQ(supervisor->num_running(), 0);
  EXPECT_FALSE(supervisor->WaitForExit(absl::Milliseconds(50)).has_value());
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1) << "no unreaped child of this process";
}

TEST_F(ProcessSupervisorTest, DestructorStopsRunningChildren) {
  pid_t pid;
  {
    auto supervisor = NewSupervisor();
    absl::StatusOr<pid_t> started = supervisor->Start({.name = "s", .argv = {"/bin/sleep", "30"}});
    ASSERT_THAT(started, IsOk());
    pid = *started;
  }
  EXPECT_TRUE(ProcessGone(pid));
}

// The launcher's death reaches each child as the signal it asked for (SIGKILL unless told).
void ExpectParentDeathSignal(int parent_death_signal) {
  // This test process becomes the subreaper, so orphans are reparented to it and can be waited for.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    // A stand-in launcher: supervises one sleep, reports its pid, then waits to be killed.
    auto supervisor = NewSupervisor();
    absl::StatusOr<pid_t> pid = supervisor->Start(
        {.name = "orphan?", .argv = {"/bin/sleep", "30"}, .parent_death_signal = parent_death_signal});
    const pid_t child = pid.ok() ? *pid : -1;
    (void)!write(pipe_fds[1], &child, sizeof(child));
    pause();
    _exit(0);
  }
  close(pipe_fds[1]);
  pid_t child = -1;
  ASSERT_EQ(read(pipe_fds[0], &child, sizeof(child)), static_cast<ssize_t>(sizeof(child)));
  close(pipe_fds[0]);
  ASSERT_GT(child, 0);
  ASSERT_EQ(kill(launcher, SIGKILL), 0);
  ASSERT_EQ(waitpid(launcher, nullptr, 0), launcher);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child) << "the orphan was reparented to this process";
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), parent_death_signal) << "PR_SET_PDEATHSIG ended it";
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

TEST_F(ProcessSupervisorTest, ChildrenDieWithTheSupervisingProcess) { ExpectParentDeathSignal(SIGKILL); }

// Issue 37, defect 9: the scheduler asks for SIGTERM, to end its streams before it goes.
TEST_F(ProcessSupervisorTest, AChildMayAskForAGentlerSignalWhenTheLauncherDies) {
  ExpectParentDeathSignal(SIGTERM);
}

}  // namespace
}  // namespace baton::runtime
