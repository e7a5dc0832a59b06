#include "runtime/rpc/internal_auth.h"

#include "runtime/process/deployment_secret.h"

namespace baton::rpc {

grpc::Status CheckDeploymentSecret(const grpc::ServerContext* context, std::string_view expected) {
  if (expected.empty()) return grpc::Status::OK;
  if (context != nullptr) {
    const auto& metadata = context->client_metadata();
    const auto it = metadata.find(kDeploymentSecretMetadata);
    if (it != metadata.end() &&
        runtime::SecretsMatch(expected, std::string_view(it->second.data(), it->second.size()))) {
      return grpc::Status::OK;
    }
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "internal API: missing or wrong deployment secret");
}

void AttachDeploymentSecret(grpc::ClientContext& context, const std::string& secret) {
  if (!secret.empty()) context.AddMetadata(kDeploymentSecretMetadata, secret);
}

}  // namespace baton::rpc
