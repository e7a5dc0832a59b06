// WorkerServiceImpl: the gRPC face of a Worker. Each method checks the deployment secret
// (internal_auth.h), converts the request, calls the Worker and converts the result; no logic of
// its own. Synchronous API: a Decode stream holds one server
// thread for its lifetime, which suits the tens of concurrent requests a CPU worker serves.
#pragma once

#include <string>
#include <utility>

#include "baton/v1/worker.grpc.pb.h"
#include "runtime/worker/worker.h"

namespace baton::rpc {

class WorkerServiceImpl final : public v1::WorkerService::Service {
 public:
  // `deployment_secret`: what every call must carry; empty: no check.
  WorkerServiceImpl(runtime::Worker* worker, std::string deployment_secret)
      : worker_(worker), secret_(std::move(deployment_secret)) {}

  grpc::Status Prefill(grpc::ServerContext* context, const v1::PrefillRequest* request,
                       v1::PrefillResponse* response) override;
  grpc::Status Release(grpc::ServerContext* context, const v1::ReleaseRequest* request,
                       v1::ReleaseResponse* response) override;
  grpc::Status Decode(grpc::ServerContext* context, const v1::DecodeRequest* request,
                      grpc::ServerWriter<v1::DecodeEvent>* writer) override;
  grpc::Status Cancel(grpc::ServerContext* context, const v1::CancelRequest* request,
                      v1::CancelResponse* response) override;
  grpc::Status GetStats(grpc::ServerContext* context, const v1::GetStatsRequest* request,
                        v1::WorkerStats* response) override;
  grpc::Status Drain(grpc::ServerContext* context, const v1::DrainRequest* request,
                     v1::DrainResponse* response) override;

 private:
  runtime::Worker* worker_;
  const std::string secret_;
};

// Fills a WorkerStats message from the worker's snapshot.
void ToProto(const runtime::WorkerStatsSnapshot& stats, v1::WorkerStats* out);

}  // namespace baton::rpc
