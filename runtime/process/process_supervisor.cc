#include "runtime/process/process_supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/check.h"
#include "runtime/process/signals.h"

extern char** environ;

namespace baton::runtime {
namespace {

int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

// Retries a system call interrupted by a signal.
template <typename Fn>
auto RetryOnEintr(Fn fn) {
  decltype(fn()) result;
  do {
    result = fn();
  } while (result == -1 && errno == EINTR);
  return result;
}

// cv.wait_for with an absl::Duration that may be infinite (chrono would overflow). Returns pred().
template <typename Pred>
bool WaitFor(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
             absl::Duration timeout, Pred pred) {
  if (timeout == absl::InfiniteDuration()) {
    cv.wait(lock, pred);
    return true;
  }
  return cv.wait_for(lock, absl::ToChronoNanoseconds(std::max(timeout, absl::ZeroDuration())), pred);
}

absl::Status ErrnoStatus(int error, absl::string_view what) {
  return absl::ErrnoToStatus(error, absl::StrCat(what, ": ", strerrordesc_np(error)));
}

// An fd that closes itself.
class ScopedFd {
 public:
  explicit ScopedFd(int fd = -1) : fd_(fd) {}
  ~ScopedFd() { Reset(); }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }
  void Reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

absl::StatusOr<int> OpenRedirect(const std::filesystem::path& path) {
  if (path.empty()) return -1;
  const int fd = RetryOnEintr(
      [&] { return open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644); });
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot open ", path.string()));
  return fd;
}

// Runs in the forked child: only async-signal-safe calls until execve. On failure, writes errno to
// `error_fd` and exits 127.
[[noreturn]] void ExecChild(pid_t parent_pid, char* const* argv, int stdout_fd, int stderr_fd,
                            int error_fd, int parent_death_signal) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, parent_death_signal);
  // The parent may have died before prctl took effect.
  if (getppid() != parent_pid) _exit(127);
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  for (int signal = 1; signal < NSIG; ++signal) sigaction(signal, &default_action, nullptr);
  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, nullptr);
  if ((stdout_fd >= 0 && dup2(stdout_fd, STDOUT_FILENO) < 0) ||
      (stderr_fd >= 0 && dup2(stderr_fd, STDERR_FILENO) < 0)) {
    const int error = errno;
    (void)!write(error_fd, &error, sizeof(error));
    _exit(127);
  }
  // Descriptors the supervisor's process holds open (sockets, files) do not leak into the child.
  syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC);
  execve(argv[0], argv, environ);
  const int error = errno;
  (void)!write(error_fd, &error, sizeof(error));
  _exit(127);
}

}  // namespace

std::string ChildExit::Cause() const {
  if (signal > 0) return absl::StrCat("killed by signal ", signal, " (", SignalName(signal), ")");
  if (exit_code >= 0) return absl::StrCat("exited with code ", exit_code);
  return "exited (status unknown)";
}

std::string ChildExit::Describe() const {
  return absl::StrCat(name, " (pid ", pid, ") ", signal > 0 ? "was " : "", Cause());
}

absl::StatusOr<std::unique_ptr<ProcessSupervisor>> ProcessSupervisor::Create() {
  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) return ErrnoStatus(errno, "eventfd");
  return std::unique_ptr<ProcessSupervisor>(new ProcessSupervisor(wake_fd));
}

ProcessSupervisor::ProcessSupervisor(int wake_fd) : wake_fd_(wake_fd) {
  monitor_ = std::thread([this] { MonitorLoop(); });
}

ProcessSupervisor::~ProcessSupervisor() {
  if (num_running() > 0) StopAll(kDefaultStopGrace);
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutting_down_ = true;
  }
  Wake();
  monitor_.join();
  close(wake_fd_);
}

absl::StatusOr<pid_t> ProcessSupervisor::Start(const ChildSpec& spec) {
  if (spec.argv.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(spec.name, ": empty argv"));
  }
  if (!absl::StrContains(spec.argv[0], '/')) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec.name, ": argv[0] '", spec.argv[0], "' must be a path"));
  }
  // Everything the child needs is prepared before fork: it may not allocate afterwards.
  std::vector<char*> argv;
  for (const std::string& arg : spec.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  absl::StatusOr<int> stdout_fd = OpenRedirect(spec.stdout_path);
  if (!stdout_fd.ok()) return stdout_fd.status();
  const ScopedFd stdout_owner(*stdout_fd);
  absl::StatusOr<int> stderr_fd = OpenRedirect(spec.stderr_path);
  if (!stderr_fd.ok()) return stderr_fd.status();
  const ScopedFd stderr_owner(*stderr_fd);
  int error_pipe[2];
  if (pipe2(error_pipe, O_CLOEXEC) != 0) return ErrnoStatus(errno, "pipe2");
  ScopedFd error_read(error_pipe[0]);
  ScopedFd error_write(error_pipe[1]);

  const pid_t parent_pid = getpid();
  const pid_t pid = fork();
  if (pid < 0) return ErrnoStatus(errno, absl::StrCat(spec.name, ": fork"));
  if (pid == 0) ExecChild(parent_pid, argv.data(), *stdout_fd, *stderr_fd, error_write.get(), spec.parent_death_signal);

  // Also set here, so the group exists before StopAll can signal it.
  setpgid(pid, pid);
  error_write.Reset();
  int child_errno = 0;
  const ssize_t n = RetryOnEintr([&] { return read(error_read.get(), &child_errno, sizeof(child_errno)); });
  if (n > 0) {
    RetryOnEintr([&] { return waitpid(pid, nullptr, 0); });
    return ErrnoStatus(child_errno, absl::StrCat(spec.name, ": cannot execute ", spec.argv[0]));
  }
  const int pidfd = PidfdOpen(pid);
  if (pidfd < 0) {
    const int error = errno;
    kill(pid, SIGKILL);
    RetryOnEintr([&] { return waitpid(pid, nullptr, 0); });
    return ErrnoStatus(error, absl::StrCat(spec.name, ": pidfd_open"));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_[pid] = Child{.name = spec.name, .pidfd = pidfd};
  }
  Wake();
  return pid;
}

std::optional<ChildExit> ProcessSupervisor::WaitForExit(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  WaitFor(exited_cv_, lock, timeout, [&] { return !exits_.empty(); });
  if (exits_.empty()) return std::nullopt;
  ChildExit exit = std::move(exits_.front());
  exits_.pop_front();
  return exit;
}

std::vector<ChildExit> ProcessSupervisor::StopAll(absl::Duration grace) {
  std::unique_lock<std::mutex> lock(mu_);
  std::vector<pid_t> targets;
  for (auto& [pid, child] : running_) {
    child.stop_requested = true;
    targets.push_back(pid);
    SignalLocked(pid, SIGTERM);
  }
  auto all_reaped = [&] {
    for (pid_t pid : targets) {
      if (running_.contains(pid)) return false;
    }
    return true;
  };
  if (!WaitFor(exited_cv_, lock, grace, all_reaped)) {
    for (pid_t pid : targets) {
      if (running_.contains(pid)) SignalLocked(pid, SIGKILL);
    }
    exited_cv_.wait(lock, all_reaped);
  }
  std::vector<ChildExit> stopped;
  for (pid_t pid : targets) {
    auto it = exit_by_pid_.find(pid);
    BATON_CHECK(it != exit_by_pid_.end());
    stopped.push_back(std::move(it->second));
    exit_by_pid_.erase(it);
  }
  return stopped;
}

int ProcessSupervisor::num_running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(running_.size());
}

void ProcessSupervisor::Wake() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void ProcessSupervisor::Terminate(pid_t pid) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = running_.find(pid);
  if (it == running_.end()) return;
  it->second.stop_requested = true;
  SignalLocked(pid, SIGTERM);
}

void ProcessSupervisor::Kill(pid_t pid) {
  std::unique_lock<std::mutex> lock(mu_);
  if (running_.contains(pid)) SignalLocked(pid, SIGKILL);
}

void ProcessSupervisor::SignalLocked(pid_t pid, int signal) {
  // Once only: a child may treat a second SIGTERM as "stop now".
  if (kill(-pid, signal) != 0) kill(pid, signal);
}

void ProcessSupervisor::ReapLocked(pid_t pid) {
  int status = 0;
  const pid_t reaped = RetryOnEintr([&] { return waitpid(pid, &status, WNOHANG); });
  if (reaped == 0) return;  // still running
  auto it = running_.find(pid);
  ChildExit exit{.name = it->second.name, .pid = pid, .stop_requested = it->second.stop_requested};
  if (reaped == pid && WIFEXITED(status)) exit.exit_code = WEXITSTATUS(status);
  if (reaped == pid && WIFSIGNALED(status)) exit.signal = WTERMSIG(status);
  // reaped < 0 (ECHILD): someone else waited for our child; the status is lost but it is gone.
  close(it->second.pidfd);
  running_.erase(it);
  if (exit.stop_requested) exit_by_pid_[pid] = exit;
  exits_.push_back(std::move(exit));
  exited_cv_.notify_all();
}

void ProcessSupervisor::MonitorLoop() {
  // Signals are for the threads that wait for them (sigwait in the launcher), never for this one.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  std::vector<pollfd> fds;
  std::vector<pid_t> pids;  // pids[i] owns fds[i + 1]
  while (true) {
    fds.assign(1, pollfd{.fd = wake_fd_, .events = POLLIN});
    pids.clear();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (shutting_down_) return;
      for (const auto& [pid, child] : running_) {
        fds.push_back(pollfd{.fd = child.pidfd, .events = POLLIN});
        pids.push_back(pid);
      }
    }
    if (RetryOnEintr([&] { return poll(fds.data(), fds.size(), -1); }) < 0) {
      BATON_CHECK(false && "poll on the supervisor's pidfds failed");
    }
    if (fds[0].revents & POLLIN) {
      uint64_t count;
      (void)!read(wake_fd_, &count, sizeof(count));
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < pids.size(); ++i) {
      if (fds[i + 1].revents != 0 && running_.contains(pids[i])) ReapLocked(pids[i]);
    }
  }
}

}  // namespace baton::runtime
