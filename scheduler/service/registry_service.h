// RegistryServiceImpl: the gRPC face of the WorkerRegistry (workers register and heartbeat).
#pragma once

#include "baton/v1/worker.grpc.pb.h"
#include "scheduler/global/worker_registry.h"

namespace baton::scheduler {

class RegistryServiceImpl final : public v1::WorkerRegistryService::Service {
 public:
  explicit RegistryServiceImpl(WorkerRegistry* registry) : registry_(registry) {}

  grpc::Status Register(grpc::ServerContext* context, const v1::RegisterRequest* request,
                        v1::RegisterResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;

 private:
  WorkerRegistry* registry_;
};

}  // namespace baton::scheduler
