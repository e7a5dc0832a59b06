#include "scheduler/service/generate_proto.h"

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "runtime/rpc/proto_conversion.h"

namespace baton::scheduler {

namespace {

// `text` parsed as JSON of the expected kind (is_kind); InvalidArgument naming `field` otherwise.
absl::StatusOr<nlohmann::ordered_json> ParseJsonField(const std::string& text, absl::string_view field,
                                                      bool (nlohmann::ordered_json::*is_kind)() const
                                                          noexcept,
                                                      absl::string_view kind) {
  nlohmann::ordered_json value = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !(value.*is_kind)()) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must be a JSON ", kind));
  }
  return value;
}

absl::StatusOr<ChatPrompt> ChatFromProto(const v1::ChatPrompt& proto) {
  ChatPrompt chat;
  for (int i = 0; i < proto.messages_size(); ++i) {
    const v1::ChatMessage& message = proto.messages(i);
    nlohmann::ordered_json entry = {{"role", message.role()}};
    entry["content"] = message.has_content() ? nlohmann::ordered_json(message.content()) : nullptr;
    if (!message.name().empty()) entry["name"] = message.name();
    if (!message.tool_calls_json().empty()) {
      ASSIGN_OR_RETURN(entry["tool_calls"],
                       ParseJsonField(message.tool_calls_json(),
                                      absl::StrCat("chat.messages[", i, "].tool_calls_json"),
                                      &nlohmann::ordered_json::is_array, "array"));
    }
    if (!message.tool_call_id().empty()) entry["tool_call_id"] = message.tool_call_id();
    chat.messages.push_back(std::move(entry));
  }
  chat.options.add_generation_prompt = !proto.has_add_generation_prompt() || proto.add_generation_prompt();
  if (!proto.tools_json().empty()) {
    ASSIGN_OR_RETURN(chat.options.tools, ParseJsonField(proto.tools_json(), "chat.tools_json",
                                                        &nlohmann::ordered_json::is_array, "array"));
  }
  if (!proto.chat_template_kwargs_json().empty()) {
    ASSIGN_OR_RETURN(chat.options.template_kwargs,
                     ParseJsonField(proto.chat_template_kwargs_json(), "chat.chat_template_kwargs_json",
                                    &nlohmann::ordered_json::is_object, "object"));
  }
  return chat;
}

}  // namespace

absl::StatusOr<GenerateRequest> FromProto(const v1::GenerateRequest& request) {
  GenerateRequest out;
  out.request_id = request.request_id();
  out.model = request.model();
  switch (request.prompt_case()) {
    case v1::GenerateRequest::kText:
      out.prompt_text = request.text();
      break;
    case v1::GenerateRequest::kTokenIds:
      out.prompt_ids.emplace(request.token_ids().ids().begin(), request.token_ids().ids().end());
      break;
    case v1::GenerateRequest::kChat: {
      ASSIGN_OR_RETURN(out.chat, ChatFromProto(request.chat()));
      break;
    }
    default:
      break;  // none: ValidateRequest says so
  }
  const v1::SamplingParams& sampling = request.sampling();
  const v1::StopConditions& stop = request.stop();
  runtime::GenerationParams& params = out.params;
  params.sampling = kernels::SamplingOptions{
      .temperature = sampling.temperature(),
      .top_k = sampling.top_k(),
      .top_p = sampling.top_p() == 0 ? 1.0f : sampling.top_p(),
      .min_p = sampling.min_p()};
  rpc::LogitsProcessorsFromProto(sampling, stop, &params.logits_processors);
  ASSIGN_OR_RETURN(params.constraint, rpc::FromProto(sampling.structured_outputs()));
  out.seed_given = sampling.has_seed();
  out.temperature_given = sampling.has_temperature();
  out.top_k_given = sampling.has_top_k();
  out.top_p_given = sampling.has_top_p();
  params.seed = sampling.has_seed() ? sampling.seed() : 0;
  out.max_tokens_given = stop.has_max_tokens();
  params.max_tokens = stop.has_max_tokens() ? stop.max_tokens() : 0;
  params.stop_token_ids.assign(stop.stop_token_ids().begin(), stop.stop_token_ids().end());
  params.ignore_eos = stop.ignore_eos();
  if (request.has_logprobs()) params.num_logprobs = request.logprobs();
  if (sampling.has_prompt_logprobs()) params.num_prompt_logprobs = sampling.prompt_logprobs();
  out.stop_strings.assign(stop.stop().begin(), stop.stop().end());
  out.include_stop_str_in_output = stop.include_stop_str_in_output();
  return out;
}

void ToProto(const GenerateChunk& chunk, v1::GenerateResponse* out) {
  out->set_request_id(chunk.request_id);
  out->set_text(chunk.text);
  out->mutable_token_ids()->Assign(chunk.token_ids.begin(), chunk.token_ids.end());
  rpc::ToProto(chunk.logprobs, out->mutable_logprobs());
  rpc::ToProto(chunk.prompt_logprobs, out->mutable_prompt_logprobs());
  if (!chunk.timing.empty()) {
    v1::ServerTiming* timing = out->mutable_timing();
    timing->set_arrival_us(chunk.timing.arrival_us);
    timing->set_prefill_start_us(chunk.timing.prefill_start_us);
    timing->set_prefill_end_us(chunk.timing.prefill_end_us);
    timing->set_kv_transfer_start_us(chunk.timing.kv_transfer_start_us);
    timing->set_kv_transfer_end_us(chunk.timing.kv_transfer_end_us);
    timing->mutable_token_emit_us()->Assign(chunk.timing.token_emit_us.begin(),
                                            chunk.timing.token_emit_us.end());
  }
  out->set_finish_reason(rpc::ToProto(chunk.finish_reason));
  if (chunk.finish_reason != runtime::FinishReason::kNone) {
    out->mutable_prompt_token_ids()->Assign(chunk.prompt_token_ids.begin(),
                                            chunk.prompt_token_ids.end());
    out->set_num_prompt_tokens(chunk.num_prompt_tokens);
    out->set_num_generated_tokens(chunk.num_generated_tokens);
    out->set_num_cached_tokens(chunk.num_cached_tokens);
  }
}

void ToProto(const WorkerRegistry::Health& health, v1::HealthResponse* out) {
  out->set_status(!health.all_phases_served    ? v1::HealthResponse::STATUS_NOT_SERVING
                  : !health.all_expected_alive ? v1::HealthResponse::STATUS_DEGRADED
                                               : v1::HealthResponse::STATUS_SERVING);
  for (const std::string& problem : health.problems) out->add_problems(problem);
}

}  // namespace baton::scheduler
