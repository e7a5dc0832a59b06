// FaultInjector: deals the faults of `baton bench --fault` while a run goes.
//
// Victims come from the deployment's own registry: the scheduler's ListWorkers on its internal port,
// authenticated with the deployment secret, names every worker with the pid it registered and
// whether the scheduler still counts it alive. At each due time the injector picks one live worker
// of the spec's role (seeded, uniformly) and signals its process. What follows is the deployment's
// own recovery, which is what the run measures: the scheduler cuts the worker off and moves its
// requests, `baton serve` restarts it (a frozen one after killing it).
//
// Signalling needs the bench on the worker's host, as the same user. Before each signal the
// process's /proc/PID/cmdline must be that worker's (`baton worker ... --role R --instance I`), so
// that a pid registered from another host never hits an unrelated process here; a mismatch is an
// event with an error, not a signal. On Stop, workers this run froze that still exist get SIGCONT
// (under `--no-worker-restart` nobody else would wake them).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "benchmarks/bench/fault.h"
#include "benchmarks/bench/rng.h"
#include "runtime/worker/worker_role.h"

namespace baton::bench {

struct RegisteredWorker {
  runtime::WorkerRole role = runtime::WorkerRole::kDecode;
  int instance_idx = 0;
  int pid = 0;
  bool alive = false;  // the scheduler has not cut it off
};

// Lists the deployment's workers; may be called from any thread.
using WorkerLister = std::function<absl::StatusOr<std::vector<RegisteredWorker>>()>;
// Sends `signal` to `worker`'s process.
using WorkerSignaller = std::function<absl::Status(const RegisteredWorker& worker, int signal)>;

// The scheduler's registry at `target` (HOST:PORT of its internal port), each call presenting
// `secret` and answering within `deadline`.
WorkerLister RegistryWorkerLister(const std::string& target, std::string secret,
                                  absl::Duration deadline = absl::Seconds(2));

// kill(2) after checking /proc/PID/cmdline names `worker`: FailedPrecondition when it does not
// (another process, or a worker on another host), NotFound when the process is gone.
absl::Status SignalLocalWorker(const RegisteredWorker& worker, int signal);

class FaultInjector {
 public:
  FaultInjector(std::vector<FaultSpec> specs, WorkerLister lister, WorkerSignaller signaller,
                uint64_t seed);
  ~FaultInjector();  // Stop()s

  // Starts dealing: spec i's k-th fault falls at start + k * period (k >= 1).
  void Start();
  // Stops dealing, wakes what this run froze, and returns every event in time order. Idempotent.
  std::vector<FaultEvent> Stop();

 private:
  void Loop(absl::Time start);
  FaultEvent Deal(const FaultSpec& spec, double time_s);

  const std::vector<FaultSpec> specs_;
  const WorkerLister lister_;
  const WorkerSignaller signaller_;
  Rng rng_;  // the loop thread's only

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<FaultEvent> events_ ABSL_GUARDED_BY(mu_);
  std::vector<RegisteredWorker> frozen_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace baton::bench
