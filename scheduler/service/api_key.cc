#include "scheduler/service/api_key.h"

#include "runtime/process/deployment_secret.h"

namespace baton::scheduler {

bool PresentsApiKey(std::string_view authorization, std::string_view api_key) {
  if (api_key.empty()) return true;
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization.size() < kScheme.size()) return false;
  // The scheme is case-insensitive (RFC 7235); the key is not.
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if ((authorization[i] | 0x20) != (kScheme[i] | 0x20)) return false;
  }
  return runtime::SecretsMatch(api_key, authorization.substr(kScheme.size()));
}

grpc::Status CheckGrpcApiKey(const grpc::ServerContext& context, std::string_view api_key) {
  if (api_key.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find(kAuthorizationMetadata);
  if (it != metadata.end() && PresentsApiKey(std::string_view(it->second.data(), it->second.size()), api_key)) {
    return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "missing or wrong API key: send metadata \"authorization: Bearer <key>\"");
}

}  // namespace baton::scheduler
