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

}  // namespace baton::scheduler
