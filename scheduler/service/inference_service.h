// InferenceServiceImpl: the public gRPC API of the global scheduler (baton.v1.InferenceService).
// Generate delegates to the RequestDriver; Health and GetModelInfo read the registry and the model.
#pragma once

#include "baton/v1/inference.grpc.pb.h"
#include "scheduler/service/request_driver.h"

namespace baton::scheduler {

class InferenceServiceImpl final : public v1::InferenceService::Service {
 public:
  explicit InferenceServiceImpl(RequestDriver* driver) : driver_(driver) {}

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override;
  grpc::Status Health(grpc::ServerContext* context, const v1::HealthRequest* request,
                      v1::HealthResponse* response) override;
  grpc::Status GetModelInfo(grpc::ServerContext* context, const v1::GetModelInfoRequest* request,
                            v1::GetModelInfoResponse* response) override;

 private:
  RequestDriver* driver_;
};

}  // namespace baton::scheduler
