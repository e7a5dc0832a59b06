// RequestDriver: the entry point of the global scheduler for one Generate request, whatever front
// end it came from (gRPC or OpenAI HTTP, which convert their wire type to a GenerateRequest first).
//
// Prepare validates (ValidateRequest, then the model's vocabulary and context length), tokenizes
// and admits; Execute runs the prepared request's life on the workers as a RequestFlow (routing,
// prefill, hand-off, decode, KV release, cancellation and worker failures: see request_flow.h).
//
// Admission (admission.h): Prepare rejects a request whose predicted TTFT or TPOT breaks the
// AdmissionPolicy with RESOURCE_EXHAUSTED; Execute never rejects on predictions. Every flow feeds the
// driver's LatencyModel, which admission reads. Thread-safe: front ends call it from many threads.
//
// Draining (SIGTERM to the scheduler): after StartDraining, Prepare refuses new requests with
// UNAVAILABLE "draining" (HTTP 503) while those already executing run to their end;
// num_executing() says how many are left.
//
// Logging (kernels/common/log.h), at info: one line per request, RequestLogLine's key=value pairs
// when an executed request ends, and "request outcome=rejected ..." when Prepare refuses one.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "scheduler/global/admission.h"
#include "scheduler/global/generate_chunk.h"
#include "scheduler/global/generate_request.h"
#include "scheduler/global/latency_model.h"
#include "scheduler/global/request_metrics.h"
#include "scheduler/global/served_model.h"
#include "scheduler/global/worker_client.h"
#include "scheduler/global/worker_registry.h"

namespace baton::scheduler {

struct RequestDriverOptions {
  bool disaggregated = true;                    // prefill + decode instances; false: colocated ones
  absl::Duration kv_lease = absl::Seconds(30);  // how long a prefill instance holds KV for decode
  int max_local_prefill_tokens = 0;             // conditional disaggregation (request_flow.h)
  bool kv_aware_routing = true;                 // false: least loaded (request_flow.h)
  AdmissionPolicy admission;                    // default: admit everything
  // Called once per executed request, as it ends (on the thread that ran it), with what it
  // measured: the scheduler's Prometheus metrics. Null: nothing.
  std::function<void(const RequestMetrics&)> on_request_done;
};

// How one request's flow reaches its workers and its client.
struct RequestIo {
  // The worker calls; a front end may tie them to its own call (a client that leaves cancels them).
  WorkerClient* workers = nullptr;
  ChunkSink write;                                   // false: the client is gone
  std::function<bool()> is_cancelled = [] { return false; };  // the client cancelled or left
};

class RequestDriver {
 public:
  RequestDriver(const ServedModel* model, WorkerRegistry* registry, RequestDriverOptions options);

  // Validates and tokenizes (InvalidArgument naming the problem), then admits: ResourceExhausted
  // with the prediction and the SLO when the admission policy rejects the request.
  absl::StatusOr<PreparedRequest> Prepare(GenerateRequest request) const;
  // Runs a prepared request to its end: UNAVAILABLE when no live worker can take it or one dies
  // under it, CANCELLED when the client left.
  absl::Status Execute(PreparedRequest prepared, const RequestIo& io);
  // Prepare + Execute; a bad request is INVALID_ARGUMENT before any chunk.
  absl::Status Run(GenerateRequest request, const RequestIo& io);

  // From now on Prepare refuses every request (UNAVAILABLE); executing ones are untouched.
  void StartDraining() { draining_.store(true); }
  bool draining() const { return draining_.load(); }
  // The workers' health (WorkerRegistry::CheckHealth), not serving while draining: what both front
  // ends' Health answers.
  WorkerRegistry::Health CheckHealth() const;
  // Requests inside Execute now.
  int num_executing() const { return num_executing_.load(); }

  // One log line: the admission policy, the latency model's estimates per instance, and how many
  // requests admission checked and rejected since the previous call (with the last message).
  std::string TakeAdmissionReport();

  const ServedModel& model() const { return *model_; }
  WorkerRegistry& registry() { return *registry_; }
  const LatencyModel& latency_model() const { return latency_model_; }

 private:
  std::string NewRequestId() const;
  absl::StatusOr<PreparedRequest> PrepareUnlogged(GenerateRequest request) const;
  // OK, or ResourceExhausted from DecideAdmission. The prefill's work is the prompt's tokens the
  // instance routing would pick does not hold in its prefix cache.
  absl::Status Admit(const std::vector<int32_t>& prompt) const;

  const ServedModel* model_;
  WorkerRegistry* registry_;
  std::atomic<bool> draining_ = false;
  std::atomic<int> num_executing_ = 0;
  const RequestDriverOptions options_;
  LatencyModel latency_model_;
  mutable absl::Mutex admission_mu_;
  mutable int64_t num_checked_ ABSL_GUARDED_BY(admission_mu_) = 0;   // since the last report
  mutable int64_t num_rejected_ ABSL_GUARDED_BY(admission_mu_) = 0;  // since the last report
  mutable std::string last_rejection_ ABSL_GUARDED_BY(admission_mu_);
  mutable absl::Mutex mu_;
  mutable int64_t next_request_id_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace baton::scheduler
