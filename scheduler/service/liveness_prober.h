// LivenessProber: settles the worker registry's suspects (workers whose heartbeats stopped for the
// liveness timeout) by asking each directly before it is cut off, so that a busy host, whose
// heartbeats arrive late, is not mistaken for a frozen process, whose never do.
//
// A suspect is dead when:
//   - it runs on this host (a loopback address) and its process is stopped (SIGSTOP: /proc state
//     T or t) or gone: at once;
//   - it does not answer a GetStats call within probe_timeout (a process on this host that is
//     visibly running gets kRunningPatience instead: only a frozen one is cut off fast).
// Otherwise it is vouched for and stays. Probes run on threads of their own, never in the loop that
// calls Check. Thread-compatible: Check from one thread.
#pragma once

#include <atomic>
#include <list>
#include <memory>
#include <thread>

#include "absl/time/time.h"
#include "scheduler/global/worker_registry.h"
#include "scheduler/service/grpc_worker_client.h"

namespace baton::scheduler {

class LivenessProber {
 public:
  static constexpr absl::Duration kRunningPatience = absl::Seconds(5);

  // registry and stubs must outlive the prober.
  LivenessProber(WorkerRegistry* registry, WorkerStubs* stubs, absl::Duration probe_timeout)
      : registry_(registry), stubs_(stubs), probe_timeout_(probe_timeout) {}
  ~LivenessProber();  // waits for the probes in flight (each ends by its deadline)

  // Starts a probe of every new suspect.
  void Check(absl::Time now);

 private:
  struct Probe {
    std::thread thread;
    std::atomic<bool> done = false;
  };
  void Run(const WorkerRegistry::Suspect& suspect);

  WorkerRegistry* const registry_;
  WorkerStubs* const stubs_;
  const absl::Duration probe_timeout_;
  std::list<std::unique_ptr<Probe>> probes_;
};

}  // namespace baton::scheduler
