// ReflectionV1Service: gRPC server reflection v1 (grpc.reflection.v1.ServerReflection), next to the
// v1alpha one that the Debian gRPC 1.51 plugin serves (grpcpp/ext/proto_server_reflection_plugin.h);
// newer clients (grpcurl, Postman, grpcio-reflection's v1) ask for v1 first. It answers from the
// process's generated descriptor pool as the v1alpha implementation does: list_services (the names
// given), file_by_filename, file_containing_symbol, file_containing_extension and
// all_extension_numbers_of_type, each file with every file it imports that this answer has not
// sent yet. It tells only what the server serves: the files that define the services it lists and
// what they import; any other file or symbol (the internal baton.v1.WorkerService of worker.proto,
// say, which the same binary links) is an error_response NOT_FOUND, as is anything not in the pool.
// A call must pass `authorize` (the public API key) before it is answered. Thread-safe.
//
// ReflectionV1AlphaService serves the same answers at grpc.reflection.v1alpha's method for older
// clients: v1's messages are v1alpha's under another package name, the same bytes on the wire.
// (gRPC's own v1alpha plugin cannot be told what to hide, nor to ask for a key.)
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace baton::rpc {

class ReflectionV1Service final : public grpc::reflection::v1::ServerReflection::Service {
 public:
  // OK to answer the caller; anything else is the call's status.
  using Authorize = std::function<grpc::Status(const grpc::ServerContext&)>;

  // service_names: what list_services answers, the full names of the services on the server; their
  // files, and what those import, are the files it sends. authorize: null lets every caller in.
  explicit ReflectionV1Service(std::vector<std::string> service_names, Authorize authorize = nullptr);

  grpc::Status ServerReflectionInfo(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<grpc::reflection::v1::ServerReflectionResponse,
                               grpc::reflection::v1::ServerReflectionRequest>* stream) override;

  // One request's answer (what the stream writes back for it).
  grpc::reflection::v1::ServerReflectionResponse Answer(
      const grpc::reflection::v1::ServerReflectionRequest& request) const;

 private:
  const std::vector<std::string> service_names_;
  const Authorize authorize_;
  std::set<std::string> served_files_;
};

class ReflectionV1AlphaService final : public grpc::Service {
 public:
  // v1 must outlive this.
  explicit ReflectionV1AlphaService(ReflectionV1Service* v1);
};

}  // namespace baton::rpc
