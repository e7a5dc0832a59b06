// InferenceServiceImpl: the public gRPC API of the global scheduler (baton.v1.InferenceService).
//
// Generate drives a request along DESIGN.md's path: validate and tokenize once; prefill on the
// instance with the fewest outstanding prefill tokens and stream the first token at once; hand the
// request to a decode instance, which pulls the KV; release the prefill instance's blocks when the
// decode instance reports the transfer; stream detokenized text until EOS, a stop string or
// max_tokens. In colocated mode one worker runs both phases. A client that cancels or disconnects
// cancels the worker calls (cancellation propagates from the server context), which frees the
// request's KV and queue slots on every worker. A worker that fails a call as unreachable is marked
// dead: the request ends with UNAVAILABLE and the instance gets no new work.
#pragma once

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "baton/v1/inference.grpc.pb.h"
#include "baton/v1/worker.grpc.pb.h"
#include "runtime/model/model_config.h"
#include "runtime/tokenizer/tokenizer.h"
#include "scheduler/global/worker_registry.h"

namespace baton::scheduler {

struct ServedModel {
  std::string name;  // the model directory's name, as clients pass it in `model`
  runtime::ModelConfig config;
  int max_model_len = 0;
  std::string dtype;
  std::unique_ptr<runtime::Tokenizer> tokenizer;
};

class InferenceServiceImpl final : public v1::InferenceService::Service {
 public:
  // disaggregated: prefill + decode instances; otherwise colocated ones.
  InferenceServiceImpl(const ServedModel* model, WorkerRegistry* registry, bool disaggregated,
                       absl::Duration kv_lease);

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override;
  grpc::Status Health(grpc::ServerContext* context, const v1::HealthRequest* request,
                      v1::HealthResponse* response) override;
  grpc::Status GetModelInfo(grpc::ServerContext* context, const v1::GetModelInfoRequest* request,
                            v1::GetModelInfoResponse* response) override;

 private:
  v1::WorkerService::Stub* StubFor(const WorkerRef& worker);
  std::string NewRequestId();

  const ServedModel* model_;
  WorkerRegistry* registry_;
  const bool disaggregated_;
  const absl::Duration kv_lease_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<v1::WorkerService::Stub>> stubs_
      ABSL_GUARDED_BY(mu_);  // by address
  int64_t next_request_id_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace baton::scheduler
