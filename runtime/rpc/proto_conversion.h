// Proto messages <-> native structs, in one place. Conversions from the wire validate what the
// message alone can tell (ranges, required fields) and fail with InvalidArgument naming the field;
// checks that need the model (context length, vocabulary) belong to the core.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "baton/v1/inference.pb.h"
#include "baton/v1/worker.pb.h"
#include "runtime/batch/sequence.h"
#include "runtime/worker/worker_role.h"

namespace baton::rpc {

// Sampling and stop conditions of the worker API. (The public API's are checked by the scheduler's
// ValidateRequest, scheduler/global/generate_request.h, with the same messages.)
absl::StatusOr<runtime::GenerationParams> GenerationParamsFromProto(const v1::SamplingParams& sampling,
                                                                    const v1::StopConditions& stop,
                                                                    std::optional<int32_t> logprobs,
                                                                    uint64_t seed);
// The logits processors' fields of the two messages (repetition_penalty 0, unset, is 1); no checks.
void LogitsProcessorsFromProto(const v1::SamplingParams& sampling, const v1::StopConditions& stop,
                               runtime::LogitsProcessorOptions* out);

void ToProto(const runtime::GenerationParams& params, v1::SamplingParams* sampling,
             v1::StopConditions* stop);

// The structured outputs' constraint (none when the message is unset). InvalidArgument for an
// empty choice list; whether the constraint compiles is the core's to say (it knows the vocabulary).
absl::StatusOr<runtime::OutputConstraint> FromProto(const v1::StructuredOutputs& structured);
void ToProto(const runtime::OutputConstraint& constraint, v1::StructuredOutputs* out);

v1::FinishReason ToProto(runtime::FinishReason reason);
runtime::FinishReason FromProto(v1::FinishReason reason);

void ToProto(const std::vector<kernels::TokenLogprob>& logprobs, v1::TokenLogprobs* out);
// One TokenLogprobs per token, appended to `out`.
void ToProto(const std::vector<std::vector<kernels::TokenLogprob>>& per_token,
             google::protobuf::RepeatedPtrField<v1::TokenLogprobs>* out);
std::vector<kernels::TokenLogprob> FromProto(const v1::TokenLogprobs& logprobs);
std::vector<std::vector<kernels::TokenLogprob>> FromProto(
    const google::protobuf::RepeatedPtrField<v1::TokenLogprobs>& per_token);

v1::WorkerRole ToProto(runtime::WorkerRole role);
// nullopt for WORKER_ROLE_UNSPECIFIED and values this build does not know.
std::optional<runtime::WorkerRole> FromProto(v1::WorkerRole role);

void ToProto(const runtime::BlockAllocator::CacheEvents& events, v1::KvCacheEvents* out);
// InvalidArgument when block_hashes and stored differ in length.
absl::StatusOr<runtime::BlockAllocator::CacheEvents> FromProto(const v1::KvCacheEvents& events);

// Microseconds since the Unix epoch, the unit of every timestamp in the API.
int64_t NowMicros();

}  // namespace baton::rpc
