// The one place where absl::Status and grpc::Status meet. The codes are numerically identical; a
// status's payloads (runtime/worker/worker_draining.h's mark, say) travel in gRPC's error details as
// a google.rpc.Status-shaped RpcStatus, one Any per payload, so that errors are told apart by code
// and payload, never by message text.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "baton/v1/worker.pb.h"
#include "grpcpp/support/status.h"

namespace baton::rpc {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const auto code = static_cast<grpc::StatusCode>(status.code());
  v1::RpcStatus details;
  status.ForEachPayload([&details](absl::string_view url, const absl::Cord& payload) {
    google::protobuf::Any* any = details.add_details();
    any->set_type_url(std::string(url));
    any->set_value(std::string(payload));
  });
  if (details.details().empty()) return grpc::Status(code, std::string(status.message()));
  details.set_code(static_cast<int32_t>(status.code()));
  details.set_message(std::string(status.message()));
  return grpc::Status(code, std::string(status.message()), details.SerializeAsString());
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  v1::RpcStatus details;
  if (!status.error_details().empty() && details.ParseFromString(status.error_details())) {
    for (const google::protobuf::Any& any : details.details()) out.SetPayload(any.type_url(), absl::Cord(any.value()));
  }
  return out;
}

}  // namespace baton::rpc
