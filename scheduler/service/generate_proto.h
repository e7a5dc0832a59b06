// The public gRPC API's messages <-> the scheduler's native request, chunk and health, in one
// place. The conversion from the wire only maps (proto3 defaults included: top_p 0 means 1, an unset
// max_tokens or seed is "not given"); ValidateRequest checks the result.
#pragma once

#include "absl/status/statusor.h"
#include "baton/v1/inference.pb.h"
#include "scheduler/global/generate_chunk.h"
#include "scheduler/global/generate_request.h"
#include "scheduler/global/worker_registry.h"

namespace baton::scheduler {

// InvalidArgument when a chat prompt's JSON fields (tool_calls_json, tools_json,
// chat_template_kwargs_json) do not parse as what they name.
absl::StatusOr<GenerateRequest> FromProto(const v1::GenerateRequest& request);
void ToProto(const GenerateChunk& chunk, v1::GenerateResponse* out);
// SERVING, DEGRADED (a phase is served, some expected worker is not alive) or NOT_SERVING.
void ToProto(const WorkerRegistry::Health& health, v1::HealthResponse* out);

}  // namespace baton::scheduler
