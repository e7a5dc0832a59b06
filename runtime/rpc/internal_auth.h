// The deployment secret on gRPC calls (runtime/process/deployment_secret.h): a client attaches it to
// each internal call as metadata, a server checks it before any work. Only on the internal services
// (the worker registry, the worker API); the public API has its own key (--api-key).
#pragma once

#include <string>
#include <string_view>

#include "grpcpp/grpcpp.h"

namespace baton::rpc {

inline constexpr char kDeploymentSecretMetadata[] = "x-baton-deployment-secret";

// OK when `expected` is empty (authentication off: tests of one process) or the call carries it;
// otherwise UNAUTHENTICATED, naming neither the secret nor what was presented.
grpc::Status CheckDeploymentSecret(const grpc::ServerContext* context, std::string_view expected);

// Adds `secret` to the call's metadata; nothing when it is empty.
void AttachDeploymentSecret(grpc::ClientContext& context, const std::string& secret);

}  // namespace baton::rpc
