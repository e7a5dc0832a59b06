// WorkerRestarter: `baton serve` bringing its dead workers back.
//
// Each worker that exits (crashed, killed, or killed here because the scheduler cut it off: frozen
// or hung) is started again after RestartSchedule's backoff, from the same command line. The new
// process registers with the scheduler as a new incarnation of the same instance: the scheduler
// drops the old incarnation, whose KV died with it, and its Health says DEGRADED until then.
// Logs every decision to stderr ("baton: restarting decode worker 1 in 1s").
//
// Not thread-safe: the launcher's main loop drives it.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "runtime/process/process_supervisor.h"
#include "runtime/process/restart_schedule.h"

namespace baton::cli {

// A worker as the scheduler's registry sees it (ListWorkers).
struct RegisteredWorker {
  std::string name;  // "decode worker 0"
  pid_t pid = 0;     // of the incarnation the registry knows
  bool alive = false;
  std::string why;   // when cut off: "no heartbeat for 1.2s"
};

class WorkerRestarter {
 public:
  WorkerRestarter(runtime::ProcessSupervisor& supervisor, runtime::RestartOptions options);

  // `spec` started as `pid` at `now`.
  void Started(const runtime::ChildSpec& spec, pid_t pid, absl::Time now);
  // A child exited: schedules its restart when it is one of the workers. False when it is not.
  bool OnExit(const runtime::ChildExit& exit, absl::Time now);
  // Starts every worker whose restart is due at `now`; one that cannot start is scheduled again.
  void RestartDue(absl::Time now);
  // What the registry says of each worker: one it counts alive (registered, heartbeating) is ready,
  // so its next death restarts it after the initial wait (RestartSchedule::Ready); one it cut off
  // whose process still runs is killed (SIGKILL), once, so that its exit restarts it. An entry
  // naming another pid is about an incarnation already gone.
  void OnRegistry(const std::vector<RegisteredWorker>& registry);

 private:
  struct Worker {
    runtime::ChildSpec spec;
    pid_t pid = 0;  // 0 while down
    bool killed = false;  // by OnRegistry, its exit not yet seen
  };
  void ScheduleRestart(Worker& worker, absl::Time now);

  runtime::ProcessSupervisor& supervisor_;
  runtime::RestartSchedule schedule_;
  std::map<std::string, Worker> workers_;  // by ChildSpec::name
};

}  // namespace baton::cli
