#include "scheduler/service/inference_service.h"

#include "grpcpp/grpcpp.h"
#include "runtime/rpc/status_conversion.h"
#include "scheduler/service/api_key.h"
#include "scheduler/service/generate_proto.h"

namespace baton::scheduler {

grpc::Status InferenceServiceImpl::Generate(grpc::ServerContext* context,
                                            const v1::GenerateRequest* request,
                                            grpc::ServerWriter<v1::GenerateResponse>* writer) {
  if (grpc::Status denied = CheckGrpcApiKey(*context, api_key_); !denied.ok()) return denied;
  // Worker calls are children of this call: a client that cancels or disconnects cancels them, and
  // they end by the client's deadline or, without one, by the flow's own limit.
  GrpcWorkerClient workers(stubs_, context);
  v1::GenerateResponse response;
  absl::StatusOr<GenerateRequest> native = FromProto(*request);
  if (!native.ok()) return rpc::ToGrpcStatus(native.status());
  const absl::Status status = driver_->Run(
      *std::move(native),
      RequestIo{.workers = &workers,
                .write =
                    [writer, &response](const GenerateChunk& chunk) {
                      response.Clear();
                      ToProto(chunk, &response);
                      return writer->Write(response);
                    },
                .is_cancelled = [context] { return context->IsCancelled(); }});
  return rpc::ToGrpcStatus(status);
}

grpc::Status InferenceServiceImpl::Health(grpc::ServerContext*, const v1::HealthRequest*,
                                          v1::HealthResponse* response) {
  ToProto(driver_->CheckHealth(), response);
  return grpc::Status::OK;
}

grpc::Status InferenceServiceImpl::GetModelInfo(grpc::ServerContext* context, const v1::GetModelInfoRequest*,
                                                v1::GetModelInfoResponse* response) {
  if (grpc::Status denied = CheckGrpcApiKey(*context, api_key_); !denied.ok()) return denied;
  response->set_model(driver_->model().name);
  response->set_architecture(driver_->model().config.architecture);
  response->set_max_model_len(driver_->model().max_model_len);
  response->set_vocab_size(driver_->model().config.vocab_size);
  response->set_dtype(driver_->model().dtype);
  if (driver_->model().config.bos_token_id) response->set_bos_token_id(*driver_->model().config.bos_token_id);
  for (int32_t eos : driver_->model().config.eos_token_ids) response->add_eos_token_ids(eos);
  return grpc::Status::OK;
}

}  // namespace baton::scheduler
