// ReflectionV1Service: gRPC server reflection v1 (grpc.reflection.v1.ServerReflection), next to the
// v1alpha one that the Debian gRPC 1.51 plugin serves (grpcpp/ext/proto_server_reflection_plugin.h);
// newer clients (grpcurl, Postman, grpcio-reflection's v1) ask for v1 first. It answers from the
// process's generated descriptor pool as the v1alpha implementation does: list_services (the names
// given), file_by_filename, file_containing_symbol, file_containing_extension and
// all_extension_numbers_of_type, each file with every file it imports that this answer has not
// sent yet; anything not in the pool is an error_response NOT_FOUND. Thread-safe (no state between
// calls but the list).
#pragma once

#include <string>
#include <vector>

#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace baton::rpc {

class ReflectionV1Service final : public grpc::reflection::v1::ServerReflection::Service {
 public:
  // service_names: what list_services answers, the full names of the services on the server.
  explicit ReflectionV1Service(std::vector<std::string> service_names)
      : service_names_(std::move(service_names)) {}

  grpc::Status ServerReflectionInfo(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<grpc::reflection::v1::ServerReflectionResponse,
                               grpc::reflection::v1::ServerReflectionRequest>* stream) override;

  // One request's answer (what the stream writes back for it).
  grpc::reflection::v1::ServerReflectionResponse Answer(
      const grpc::reflection::v1::ServerReflectionRequest& request) const;

 private:
  const std::vector<std::string> service_names_;
};

}  // namespace baton::rpc
