// The one place where absl::Status and grpc::Status meet. The codes are numerically identical.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace baton::rpc {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace baton::rpc
