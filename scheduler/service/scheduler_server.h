// RunSchedulerServer: the body of a `baton scheduler` process. Loads the model's config and
// tokenizer, serves InferenceService (public, with server reflection v1 and v1alpha and
// grpc.health.v1.Health, SERVING while every phase has a live worker and it is not draining; TLS
// and an API key when given) on host:port and the OpenAI HTTP API with /metrics (metrics.h) on
// host:http_port, WorkerRegistryService on
// host:internal_port (no reflection; every call must carry the deployment secret), and sweeps
// silent workers. A port already in use is an error (runtime/rpc/grpc_listener.h). Every 10 s it
// logs the admission report (RequestDriver::TakeAdmissionReport) when that changed. When *stop
// becomes true it drains: new requests get UNAVAILABLE "draining" (HTTP 503) and Health says
// NOT_SERVING, while executing requests finish, for up to drain_timeout; then it returns. Returns
// at once on a start-up error.
#pragma once

#include <atomic>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "kernels/common/dtype.h"
#include "scheduler/global/admission.h"
#include "scheduler/global/worker_registry.h"
#include "scheduler/service/openai_tools.h"

namespace baton::scheduler {

struct SchedulerOptions {
  std::filesystem::path model_dir;
  // `model` in requests and /v1/models, the first in answers; empty: model_dir's name.
  std::vector<std::string> served_model_names;
  DType weight_dtype = DType::kF32;
  std::string host = "127.0.0.1";
  int port = 50051;
  int http_port = 0;  // OpenAI-compatible HTTP; 0 = off
  int internal_port = 50054;  // the worker registry
  // What workers present to the registry and what the scheduler presents to them; empty: no
  // authentication (tests of one process).
  std::string deployment_secret;
  // The public APIs' key (scheduler/service/api_key.h); empty: open to every caller.
  std::string api_key;
  // Both set: the public APIs serve TLS with this PEM chain and key.
  std::filesystem::path tls_cert;
  std::filesystem::path tls_key;
  uint64_t http_max_body_bytes = 4ull << 20;
  // A Jinja2 chat template file replacing the model's own; empty: tokenizer_config.json's.
  std::filesystem::path chat_template;
  // After *stop: refuse new requests and let executing ones finish for up to this long.
  absl::Duration drain_timeout = absl::Seconds(30);
  bool disaggregated = true;
  std::vector<std::pair<WorkerRole, int>> expected_workers;  // {role, instances}
  int max_model_len = 0;  // 0: the model's; above max_position_embeddings: InvalidArgument
  // A worker silent this long (5 missed heartbeats) is probed directly, and cut off if the probe
  // also goes unanswered for this long (liveness_prober.h).
  absl::Duration liveness_timeout = absl::Seconds(1);
  absl::Duration kv_lease = absl::Seconds(30);
  int max_local_prefill_tokens = 0;  // conditional disaggregation (request_flow.h); 0: off
  bool kv_aware_routing = true;      // false: least loaded (request_flow.h)
  AdmissionPolicy admission;  // default: admit everything
  ChatReplyOptions chat_reply;  // tool calling and reasoning on the OpenAI chat API
};

absl::Status RunSchedulerServer(const SchedulerOptions& options, const std::atomic<bool>* stop);

}  // namespace baton::scheduler
