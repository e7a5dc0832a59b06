// ProcessSupervisor: starts child processes, reports every exit, and stops them all.
//
// Lifecycle: Create() starts a monitor thread; Start() forks and execs one child (its own process
// group, SIGKILL when the starting thread dies, default signal dispositions and an empty signal mask);
// the monitor thread reaps each child the moment it exits and queues a ChildExit, which
// WaitForExit() hands out in exit order. Nothing is ever restarted: what to do about an exit is the
// caller's decision. StopAll() sends SIGTERM to each running child's process group, SIGKILL to the
// groups still alive after the grace period, and returns once every one of them is reaped. The
// destructor does StopAll(kDefaultStopGrace) when children remain, so none outlives the supervisor.
//
// Only the children started here are reaped (waitpid on their pids, never on -1), so other code in
// the process may run its own children (std::system) alongside.
//
// Threading: every method is thread-safe. Start() ties the child's lifetime to the calling thread
// (PR_SET_PDEATHSIG fires when the thread that forked exits), so call it from a thread that outlives
// the children, typically the main thread. Requires Linux >= 5.3 (pidfd_open).
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <csignal>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace baton::runtime {

struct ChildSpec {
  std::string name;               // how reports name the child: "decode worker 1"
  std::vector<std::string> argv;  // argv[0] is the executable's path (no PATH search)
  std::filesystem::path stdout_path;  // empty: inherit; otherwise created or truncated
  std::filesystem::path stderr_path;  // empty: inherit; otherwise created or truncated
  // What the child gets when the thread that started it dies (PR_SET_PDEATHSIG). A process that can
  // end its work cleanly asks for SIGTERM: the scheduler, whose clients' streams then end with an
  // error event rather than a cut connection.
  int parent_death_signal = SIGKILL;
};

// How one child ended.
struct ChildExit {
  std::string name;
  pid_t pid = 0;
  int exit_code = -1;           // >= 0 when the child exited on its own (exit(), return from main)
  int signal = 0;               // > 0 when a signal ended it
  bool stop_requested = false;  // StopAll had signalled it

  // "decode worker 1 (pid 1234) exited with code 3" / "... was killed by signal 9 (SIGKILL)".
  std::string Describe() const;
  // The cause alone: "exited with code 3" / "killed by signal 9 (SIGKILL)".
  std::string Cause() const;
};

class ProcessSupervisor {
 public:
  static constexpr absl::Duration kDefaultStopGrace = absl::Seconds(10);

  // Internal when the monitor's eventfd cannot be created.
  static absl::StatusOr<std::unique_ptr<ProcessSupervisor>> Create();
  ~ProcessSupervisor();
  ProcessSupervisor(const ProcessSupervisor&) = delete;
  ProcessSupervisor& operator=(const ProcessSupervisor&) = delete;

  // Starts a child and returns its pid once it has exec'd. InvalidArgument for an empty argv or an
  // argv[0] without '/'; the errno's code (NotFound, PermissionDenied, ...) naming argv[0] when it
  // cannot be executed or a redirect cannot be opened — no child is left behind then.
  absl::StatusOr<pid_t> Start(const ChildSpec& spec);

  // The oldest exit not yet handed out, waiting up to `timeout` (may be absl::InfiniteDuration())
  // for one; nullopt on timeout.
  std::optional<ChildExit> WaitForExit(absl::Duration timeout);

  // Stops every running child (SIGTERM, then SIGKILL after `grace`) and reaps them all. Returns their
  // exits, marked stop_requested; they are queued for WaitForExit as well.
  std::vector<ChildExit> StopAll(absl::Duration grace);
  // Asks one running child to stop (SIGTERM, marked stop_requested) without waiting; its exit comes
  // through WaitForExit. Nothing when it is not running.
  void Terminate(pid_t pid);
  // Kills one running child at once (SIGKILL to its process group), not marked stop_requested: for
  // a child that hangs or is stopped, which SIGTERM would not end. Its exit comes through
  // WaitForExit. Nothing when it is not running.
  void Kill(pid_t pid);

  int num_running() const;

 private:
  struct Child {
    std::string name;
    int pidfd = -1;  // readable once the child has exited
    bool stop_requested = false;
  };

  explicit ProcessSupervisor(int wake_fd);
  void MonitorLoop();
  void Wake();
  // Reaps `pid` if it has exited; caller holds mu_.
  void ReapLocked(pid_t pid);
  // Sends `signal` to the child's process group (to the child alone when the group is gone); caller
  // holds mu_, which keeps the pid from being reaped and reused meanwhile.
  void SignalLocked(pid_t pid, int signal);

  const int wake_fd_;  // eventfd: Start and the destructor wake the monitor thread through it
  mutable std::mutex mu_;
  std::condition_variable exited_cv_;  // signalled on every reaped child
  std::map<pid_t, Child> running_;     // guarded by mu_
  std::deque<ChildExit> exits_;        // guarded by mu_; not yet handed out by WaitForExit
  std::map<pid_t, ChildExit> exit_by_pid_;  // guarded by mu_; every exit, for StopAll's result
  bool shutting_down_ = false;              // guarded by mu_
  std::thread monitor_;
};

}  // namespace baton::runtime
