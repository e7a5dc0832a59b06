#include "cli/worker_restarter.h"

#include <cstdio>

#include "absl/status/statusor.h"

namespace baton::cli {

WorkerRestarter::WorkerRestarter(runtime::ProcessSupervisor& supervisor, runtime::RestartOptions options)
    : supervisor_(supervisor), schedule_(options) {}

void WorkerRestarter::Started(const runtime::ChildSpec& spec, pid_t pid, absl::Time now) {
  workers_[spec.name] = Worker{.spec = spec, .pid = pid};
  schedule_.Started(spec.name, now);
}

bool WorkerRestarter::OnExit(const runtime::ChildExit& exit, absl::Time now) {
  auto it = workers_.find(exit.name);
  if (it == workers_.end() || it->second.pid != exit.pid) return false;
  it->second.pid = 0;
  ScheduleRestart(it->second, now);
  return true;
}

void WorkerRestarter::ScheduleRestart(Worker& worker, absl::Time now) {
  const absl::Time due = schedule_.Died(worker.spec.name, now);
  std::fprintf(stderr, "baton: restarting %s in %s\n", worker.spec.name.c_str(),
               absl::FormatDuration(due - now).c_str());
}

void WorkerRestarter::RestartDue(absl::Time now) {
  for (const std::string& name : schedule_.TakeDue(now)) {
    Worker& worker = workers_.at(name);
    // Counted as started before the attempt, so that a worker that cannot start backs off as a
    // crash loop does.
    schedule_.Started(name, now);
    absl::StatusOr<pid_t> pid = supervisor_.Start(worker.spec);
    if (!pid.ok()) {
      std::fprintf(stderr, "baton: cannot restart %s: %s\n", name.c_str(),
                   std::string(pid.status().message()).c_str());
      ScheduleRestart(worker, now);
      continue;
    }
    worker.pid = *pid;
    worker.killed = false;
    std::fprintf(stderr, "baton: restarted %s (pid %d, restart %d)\n", name.c_str(), *pid,
                 schedule_.num_deaths(name));
  }
}

void WorkerRestarter::OnRegistry(const std::vector<RegisteredWorker>& registry) {
  for (const RegisteredWorker& entry : registry) {
    auto it = workers_.find(entry.name);
    if (it == workers_.end() || it->second.pid != entry.pid || it->second.pid == 0 || it->second.killed) {
      continue;
    }
    if (entry.alive) {
      schedule_.Ready(entry.name);
      continue;
    }
    std::fprintf(stderr, "baton: the scheduler cut off %s (pid %d: %s); killing it to restart it\n",
                 entry.name.c_str(), entry.pid, entry.why.c_str());
    supervisor_.Kill(entry.pid);
    it->second.killed = true;
  }
}

}  // namespace baton::cli
