#include "runtime/rpc/proto_conversion.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kernels/common/status_macros.h"

namespace baton::rpc {

int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

absl::StatusOr<runtime::GenerationParams> GenerationParamsFromProto(const v1::SamplingParams& sampling,
                                                                    const v1::StopConditions& stop,
                                                                    std::optional<int32_t> logprobs,
                                                                    uint64_t seed) {
  runtime::GenerationParams params;
  if (!std::isfinite(sampling.temperature()) || sampling.temperature() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling.temperature ", sampling.temperature(), " must be >= 0"));
  }
  if (sampling.top_k() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("sampling.top_k ", sampling.top_k(), " must be >= 0"));
  }
  const float top_p = sampling.top_p() == 0 ? 1.0f : sampling.top_p();
  if (!(top_p > 0 && top_p <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling.top_p ", sampling.top_p(), " must be in (0, 1]"));
  }
  if (logprobs && (*logprobs < 0 || *logprobs > 20)) {
    return absl::InvalidArgumentError(absl::StrCat("logprobs ", *logprobs, " must be in [0, 20]"));
  }
  if (stop.has_max_tokens() && stop.max_tokens() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("stop.max_tokens ", stop.max_tokens(), " must be >= 1"));
  }
  params.sampling = kernels::SamplingOptions{.temperature = sampling.temperature(),
                                             .top_k = sampling.top_k(),
                                             .top_p = top_p,
                                             .min_p = sampling.min_p()};
  params.seed = sampling.has_seed() ? sampling.seed() : seed;
  params.max_tokens = stop.has_max_tokens() ? stop.max_tokens() : 0;
  params.stop_token_ids.assign(stop.stop_token_ids().begin(), stop.stop_token_ids().end());
  params.ignore_eos = stop.ignore_eos();
  params.num_logprobs = logprobs;
  if (sampling.has_prompt_logprobs()) {
    if (sampling.prompt_logprobs() < 0 || sampling.prompt_logprobs() > 20) {
      return absl::InvalidArgumentError(absl::StrCat("sampling.prompt_logprobs ",
                                                     sampling.prompt_logprobs(), " must be in [0, 20]"));
    }
    params.num_prompt_logprobs = sampling.prompt_logprobs();
  }
  LogitsProcessorsFromProto(sampling, stop, &params.logits_processors);
  ASSIGN_OR_RETURN(params.constraint, FromProto(sampling.structured_outputs()));
  // The vocabulary is the engine's to check (it knows it); the ranges are checked here.
  RETURN_IF_ERROR(runtime::ValidateLogitsProcessorOptions(params.logits_processors, params.sampling,
                                                          params.max_tokens, /*vocab_size=*/0));
  return params;
}

void LogitsProcessorsFromProto(const v1::SamplingParams& sampling, const v1::StopConditions& stop,
                               runtime::LogitsProcessorOptions* out) {
  out->presence_penalty = sampling.presence_penalty();
  out->frequency_penalty = sampling.frequency_penalty();
  out->repetition_penalty = sampling.repetition_penalty() == 0 ? 1.0f : sampling.repetition_penalty();
  out->logit_bias.clear();
  for (const auto& [token_id, bias] : sampling.logit_bias()) out->logit_bias[token_id] = bias;
  out->min_tokens = stop.min_tokens();
}

void ToProto(const runtime::GenerationParams& params, v1::SamplingParams* sampling,
             v1::StopConditions* stop) {
  sampling->set_temperature(params.sampling.temperature);
  sampling->set_top_k(params.sampling.top_k);
  sampling->set_top_p(params.sampling.top_p);
  sampling->set_min_p(params.sampling.min_p);
  sampling->set_seed(params.seed);
  if (params.num_prompt_logprobs) sampling->set_prompt_logprobs(*params.num_prompt_logprobs);
  const runtime::LogitsProcessorOptions& processors = params.logits_processors;
  sampling->set_presence_penalty(processors.presence_penalty);
  sampling->set_frequency_penalty(processors.frequency_penalty);
  sampling->set_repetition_penalty(processors.repetition_penalty);
  for (const auto& [token_id, bias] : processors.logit_bias) {
    (*sampling->mutable_logit_bias())[token_id] = bias;
  }
  ToProto(params.constraint, sampling->mutable_structured_outputs());
  stop->set_min_tokens(processors.min_tokens);
  stop->set_max_tokens(params.max_tokens);
  for (int32_t id : params.stop_token_ids) stop->add_stop_token_ids(id);
  stop->set_ignore_eos(params.ignore_eos);
}

absl::StatusOr<runtime::OutputConstraint> FromProto(const v1::StructuredOutputs& structured) {
  using Kind = runtime::OutputConstraint::Kind;
  runtime::OutputConstraint constraint;
  constraint.strict = !structured.has_strict() || structured.strict();
  constraint.any_whitespace = !structured.has_any_whitespace() || structured.any_whitespace();
  switch (structured.constraint_case()) {
    case v1::StructuredOutputs::kJson:
      constraint.kind = Kind::kJsonSchema;
      constraint.text = structured.json();
      break;
    case v1::StructuredOutputs::kJsonObject:
      if (structured.json_object()) constraint.kind = Kind::kJsonObject;
      break;
    case v1::StructuredOutputs::kRegex:
      constraint.kind = Kind::kRegex;
      constraint.text = structured.regex();
      break;
    case v1::StructuredOutputs::kChoice:
      if (structured.choice().choices().empty()) {
        return absl::InvalidArgumentError("sampling.structured_outputs.choice: the list of choices is empty");
      }
      constraint.kind = Kind::kChoice;
      constraint.choices.assign(structured.choice().choices().begin(), structured.choice().choices().end());
      break;
    case v1::StructuredOutputs::kGrammar:
      constraint.kind = Kind::kGrammar;
      constraint.text = structured.grammar();
      break;
    case v1::StructuredOutputs::CONSTRAINT_NOT_SET:
      break;
  }
  return constraint;
}

void ToProto(const runtime::OutputConstraint& constraint, v1::StructuredOutputs* out) {
  using Kind = runtime::OutputConstraint::Kind;
  out->Clear();
  switch (constraint.kind) {
    case Kind::kNone: return;
    case Kind::kJsonObject: out->set_json_object(true); break;
    case Kind::kJsonSchema: out->set_json(constraint.text); break;
    case Kind::kRegex: out->set_regex(constraint.text); break;
    case Kind::kChoice:
      for (const std::string& choice : constraint.choices) out->mutable_choice()->add_choices(choice);
      break;
    case Kind::kGrammar: out->set_grammar(constraint.text); break;
  }
  if (!constraint.strict) out->set_strict(false);
  if (!constraint.any_whitespace) out->set_any_whitespace(false);
}

v1::FinishReason ToProto(runtime::FinishReason reason) {
  switch (reason) {
    case runtime::FinishReason::kLength: return v1::FINISH_REASON_LENGTH;
    case runtime::FinishReason::kStop: return v1::FINISH_REASON_STOP;
    case runtime::FinishReason::kCancelled: return v1::FINISH_REASON_CANCELLED;
    case runtime::FinishReason::kNone: break;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

runtime::FinishReason FromProto(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_LENGTH: return runtime::FinishReason::kLength;
    case v1::FINISH_REASON_STOP: return runtime::FinishReason::kStop;
    case v1::FINISH_REASON_CANCELLED: return runtime::FinishReason::kCancelled;
    default: break;
  }
  return runtime::FinishReason::kNone;
}

v1::WorkerRole ToProto(runtime::WorkerRole role) {
  switch (role) {
    case runtime::WorkerRole::kPrefill: return v1::WORKER_ROLE_PREFILL;
    case runtime::WorkerRole::kDecode: return v1::WORKER_ROLE_DECODE;
    case runtime::WorkerRole::kColocated: return v1::WORKER_ROLE_COLOCATED;
  }
  return v1::WORKER_ROLE_UNSPECIFIED;
}

std::optional<runtime::WorkerRole> FromProto(v1::WorkerRole role) {
  switch (role) {
    case v1::WORKER_ROLE_PREFILL: return runtime::WorkerRole::kPrefill;
    case v1::WORKER_ROLE_DECODE: return runtime::WorkerRole::kDecode;
    case v1::WORKER_ROLE_COLOCATED: return runtime::WorkerRole::kColocated;
    default: break;
  }
  return std::nullopt;
}

void ToProto(const std::vector<kernels::TokenLogprob>& logprobs, v1::TokenLogprobs* out) {
  for (const auto& lp : logprobs) {
    auto* top = out->add_top();
    top->set_token_id(lp.token_id);
    top->set_logprob(lp.logprob);
    top->set_rank(lp.rank);
  }
}

void ToProto(const std::vector<std::vector<kernels::TokenLogprob>>& per_token,
             google::protobuf::RepeatedPtrField<v1::TokenLogprobs>* out) {
  for (const auto& logprobs : per_token) ToProto(logprobs, out->Add());
}

std::vector<kernels::TokenLogprob> FromProto(const v1::TokenLogprobs& logprobs) {
  std::vector<kernels::TokenLogprob> out;
  out.reserve(logprobs.top_size());
  for (const v1::TokenLogprob& lp : logprobs.top()) {
    out.push_back({.token_id = lp.token_id(), .logprob = lp.logprob(), .rank = lp.rank()});
  }
  return out;
}

std::vector<std::vector<kernels::TokenLogprob>> FromProto(
    const google::protobuf::RepeatedPtrField<v1::TokenLogprobs>& per_token) {
  std::vector<std::vector<kernels::TokenLogprob>> out;
  out.reserve(per_token.size());
  for (const v1::TokenLogprobs& logprobs : per_token) out.push_back(FromProto(logprobs));
  return out;
}

void ToProto(const runtime::BlockAllocator::CacheEvents& events, v1::KvCacheEvents* out) {
  out->set_reset(events.reset);
  out->mutable_block_hashes()->Reserve(static_cast<int>(events.events.size()));
  out->mutable_stored()->Reserve(static_cast<int>(events.events.size()));
  for (const runtime::BlockAllocator::CacheEvent& event : events.events) {
    out->add_block_hashes(event.hash);
    out->add_stored(event.stored);
  }
}

absl::StatusOr<runtime::BlockAllocator::CacheEvents> FromProto(const v1::KvCacheEvents& events) {
  if (events.block_hashes_size() != events.stored_size()) {
    return absl::InvalidArgumentError(absl::StrCat("kv_cache_events: ", events.block_hashes_size(),
                                                   " block_hashes but ", events.stored_size(), " stored flags"));
  }
  runtime::BlockAllocator::CacheEvents out{.reset = events.reset()};
  out.events.reserve(events.block_hashes_size());
  for (int i = 0; i < events.block_hashes_size(); ++i) {
    out.events.push_back({.hash = events.block_hashes(i), .stored = events.stored(i)});
  }
  return out;
}

}  // namespace baton::rpc
