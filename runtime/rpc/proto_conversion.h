// Proto messages <-> native structs, in one place. Conversions from the wire validate what the
// message alone can tell (ranges, required fields) and fail with InvalidArgument naming the field;
// checks that need the model (context length, vocabulary) belong to the core.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "baton/v1/inference.pb.h"
#include "baton/v1/worker.pb.h"
#include "runtime/batch/sequence.h"

namespace baton::rpc {

// A public Generate request in native form.
struct InferenceRequest {
  std::string request_id;
  std::optional<std::string> prompt_text;          // exactly one of the two prompts is set
  std::optional<std::vector<int32_t>> prompt_ids;
  runtime::GenerationParams params;                // max_tokens 0 means "up to the context"
  bool max_tokens_given = false;
  std::vector<std::string> stop_strings;
  std::string model;
};

absl::StatusOr<InferenceRequest> FromProto(const v1::GenerateRequest& request);

// Sampling and stop conditions shared by the public and the worker API.
absl::StatusOr<runtime::GenerationParams> GenerationParamsFromProto(const v1::SamplingParams& sampling,
                                                                    const v1::StopConditions& stop,
                                                                    int32_t logprobs, uint64_t seed);
void ToProto(const runtime::GenerationParams& params, v1::SamplingParams* sampling,
             v1::StopConditions* stop);

v1::FinishReason ToProto(runtime::FinishReason reason);
runtime::FinishReason FromProto(v1::FinishReason reason);

void ToProto(const std::vector<kernels::TokenLogprob>& logprobs, v1::TokenLogprobs* out);

// Microseconds since the Unix epoch, the unit of every timestamp in the API.
int64_t NowMicros();

}  // namespace baton::rpc
