// RequestDriver: drives one Generate request along DESIGN.md's path, whatever front end it came from
// (gRPC or OpenAI HTTP).
//
// Validate, tokenize and admit once; prefill on the instance with the fewest outstanding prefill tokens and
// stream the first token at once; hand the request to a decode instance, which pulls the KV; release
// the prefill instance's blocks when the decode instance reports the transfer; stream detokenized text
// until EOS, a stop string or max_tokens. In colocated mode one worker runs both phases. Worker calls
// use contexts from make_context, so a front end can tie them to its client (the gRPC service makes
// them children of its server context: a client that cancels or disconnects cancels them, which frees
// the request's KV and queue slots on every worker). A worker that fails a call as unreachable is
// marked dead: the request ends with UNAVAILABLE and the instance gets no new work.
//
// Admission (scheduler/global/admission.h): Prepare rejects a request whose predicted TTFT or TPOT
// breaks the AdmissionPolicy with RESOURCE_EXHAUSTED; Execute never rejects on predictions. Execute
// feeds the LatencyModel with the server-side timestamps of every request: the prefill's start and
// end, and the gap between consecutive tokens of the decode stream (with the decode instance's active
// requests as the batch size). Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "baton/v1/inference.pb.h"
#include "baton/v1/worker.grpc.pb.h"
#include "runtime/model/model_config.h"
#include "runtime/rpc/proto_conversion.h"
#include "runtime/tokenizer/tokenizer.h"
#include "scheduler/global/admission.h"
#include "scheduler/global/latency_model.h"
#include "scheduler/global/worker_registry.h"

namespace baton::scheduler {

struct ServedModel {
  std::string name;  // the model directory's name, as clients pass it in `model`
  runtime::ModelConfig config;
  int max_model_len = 0;
  std::string dtype;
  std::unique_ptr<runtime::Tokenizer> tokenizer;
};

// A validated, tokenized request, ready to run.
struct PreparedRequest {
  rpc::InferenceRequest request;  // request_id set, max_tokens resolved
  std::vector<int32_t> prompt;
  int64_t arrival_us = 0;
};

// Writes one response to the client; false when the client is gone.
using ResponseSink = std::function<bool(const v1::GenerateResponse&)>;
using ContextFactory = std::function<std::unique_ptr<grpc::ClientContext>()>;

class RequestDriver {
 public:
  // disaggregated: prefill + decode instances; otherwise colocated ones. A default `admission`
  // admits everything.
  RequestDriver(const ServedModel* model, WorkerRegistry* registry, bool disaggregated,
                absl::Duration kv_lease, AdmissionPolicy admission = {});

  // Validates and tokenizes (InvalidArgument naming the problem), then admits: ResourceExhausted
  // with the prediction and the SLO when the admission policy rejects the request.
  absl::StatusOr<PreparedRequest> Prepare(const v1::GenerateRequest& request) const;
  // Runs a prepared request to its end: UNAVAILABLE when no live worker can take it or one dies
  // under it, CANCELLED when the client left.
  grpc::Status Execute(PreparedRequest prepared, const ContextFactory& make_context,
                       const ResponseSink& write, const std::function<bool()>& is_cancelled);
  // Prepare + Execute; a bad request is INVALID_ARGUMENT before any response.
  grpc::Status Run(const v1::GenerateRequest& request, const ContextFactory& make_context,
                   const ResponseSink& write, const std::function<bool()>& is_cancelled);

  // One log line: the admission policy, the latency model's estimates per instance, and how many
  // requests admission checked and rejected since the previous call (with the last message).
  std::string TakeAdmissionReport();

  const ServedModel& model() const { return *model_; }
  WorkerRegistry& registry() { return *registry_; }
  const LatencyModel& latency_model() const { return latency_model_; }

 private:
  v1::WorkerService::Stub* StubFor(const WorkerRef& worker);
  std::string NewRequestId() const;
  // OK, or ResourceExhausted from DecideAdmission.
  absl::Status Admit(int64_t num_prompt_tokens) const;
  // Feeds the latency model with a decode chunk's emission times; *last_emit_us: the stream's
  // previous emission (0 before the first).
  void ObserveEmissions(const WorkerRef& decoder, const std::string& decoder_name,
                        const v1::TokenChunk& chunk, int64_t* last_emit_us);

  const ServedModel* model_;
  WorkerRegistry* registry_;
  const bool disaggregated_;
  const absl::Duration kv_lease_;
  const AdmissionPolicy admission_;
  LatencyModel latency_model_;
  mutable absl::Mutex admission_mu_;
  mutable int64_t num_checked_ ABSL_GUARDED_BY(admission_mu_) = 0;   // since the last report
  mutable int64_t num_rejected_ ABSL_GUARDED_BY(admission_mu_) = 0;  // since the last report
  mutable std::string last_rejection_ ABSL_GUARDED_BY(admission_mu_);
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<v1::WorkerService::Stub>> stubs_
      ABSL_GUARDED_BY(mu_);  // by address
  mutable int64_t next_request_id_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace baton::scheduler
