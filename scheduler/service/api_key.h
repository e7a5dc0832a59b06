// The public API's key (`--api-key`, or BATON_API_KEY). As with OpenAI's and vLLM's servers, a
// client presents it as "Authorization: Bearer KEY": an HTTP header, or the same text as gRPC
// "authorization" metadata. Health is open to all (load balancers probe it); everything else
// needs the key when one is set.
#pragma once

#include <string_view>

#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace baton::scheduler {

inline constexpr char kAuthorizationMetadata[] = "authorization";

// Whether `authorization` ("Bearer KEY") presents `api_key`, compared in time independent of
// where they differ. True when api_key is empty: no key is set.
bool PresentsApiKey(std::string_view authorization, std::string_view api_key);

// OK when the call's "authorization" metadata presents api_key (or none is set), else UNAUTHENTICATED
// saying what to send.
grpc::Status CheckGrpcApiKey(const grpc::ServerContext& context, std::string_view api_key);

}  // namespace baton::scheduler
