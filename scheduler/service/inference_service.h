// InferenceServiceImpl: the public gRPC API of the global scheduler (baton.v1.InferenceService).
// Only converts and delegates: Generate converts the request to native form once (generate_proto.h),
// runs it on the RequestDriver with worker calls that are children of this call, and converts each
// chunk back; Health and GetModelInfo read the registry and the model. With an API key, every call
// but Health must present it (api_key.h), or gets UNAUTHENTICATED before any work.
#pragma once

#include <string>
#include <utility>

#include "baton/v1/inference.grpc.pb.h"
#include "scheduler/global/request_driver.h"
#include "scheduler/service/grpc_worker_client.h"

namespace baton::scheduler {

class InferenceServiceImpl final : public v1::InferenceService::Service {
 public:
  // api_key: empty when the API is open to every caller.
  InferenceServiceImpl(RequestDriver* driver, WorkerStubs* stubs, std::string api_key = {})
      : driver_(driver), stubs_(stubs), api_key_(std::move(api_key)) {}

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override;
  grpc::Status Health(grpc::ServerContext* context, const v1::HealthRequest* request,
                      v1::HealthResponse* response) override;
  grpc::Status GetModelInfo(grpc::ServerContext* context, const v1::GetModelInfoRequest* request,
                            v1::GetModelInfoResponse* response) override;

 private:

  RequestDriver* driver_;
  WorkerStubs* stubs_;
  const std::string api_key_;
};

}  // namespace baton::scheduler
