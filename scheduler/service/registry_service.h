// RegistryServiceImpl: the gRPC face of the WorkerRegistry (workers register and heartbeat, the
// launcher reads the deployment's health), on the scheduler's internal port; every call must carry the deployment secret (internal_auth.h).
#pragma once

#include <string>
#include <utility>

#include "baton/v1/worker.grpc.pb.h"
#include "scheduler/global/worker_registry.h"

namespace baton::scheduler {

class RegistryServiceImpl final : public v1::WorkerRegistryService::Service {
 public:
  // `deployment_secret`: what every call must carry; empty: no check.
  RegistryServiceImpl(WorkerRegistry* registry, std::string deployment_secret)
      : registry_(registry), secret_(std::move(deployment_secret)) {}

  grpc::Status Register(grpc::ServerContext* context, const v1::RegisterRequest* request,
                        v1::RegisterResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  grpc::Status Health(grpc::ServerContext* context, const v1::HealthRequest* request,
                      v1::HealthResponse* response) override;
  grpc::Status ListWorkers(grpc::ServerContext* context, const v1::ListWorkersRequest* request,
                           v1::ListWorkersResponse* response) override;
  grpc::Status ReportExit(grpc::ServerContext* context, const v1::ReportExitRequest* request,
                          v1::ReportExitResponse* response) override;

 private:
  WorkerRegistry* registry_;
  const std::string secret_;
};

}  // namespace baton::scheduler
