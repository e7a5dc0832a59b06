#include "scheduler/service/generate_proto.h"

#include "runtime/rpc/proto_conversion.h"

namespace baton::scheduler {

GenerateRequest FromProto(const v1::GenerateRequest& request) {
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
    default:
      break;  // neither: ValidateRequest says so
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
  out.seed_given = sampling.has_seed();
  params.seed = sampling.has_seed() ? sampling.seed() : 0;
  out.max_tokens_given = stop.has_max_tokens();
  params.max_tokens = stop.has_max_tokens() ? stop.max_tokens() : 0;
  params.stop_token_ids.assign(stop.stop_token_ids().begin(), stop.stop_token_ids().end());
  params.ignore_eos = stop.ignore_eos();
  params.num_logprobs = request.logprobs();
  out.stop_strings.assign(stop.stop().begin(), stop.stop().end());
  return out;
}

void ToProto(const GenerateChunk& chunk, v1::GenerateResponse* out) {
  out->set_request_id(chunk.request_id);
  out->set_text(chunk.text);
  out->mutable_token_ids()->Assign(chunk.token_ids.begin(), chunk.token_ids.end());
  for (const auto& logprobs : chunk.logprobs) rpc::ToProto(logprobs, out->add_logprobs());
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
  }
}

void ToProto(const WorkerRegistry::Health& health, v1::HealthResponse* out) {
  out->set_status(!health.all_phases_served    ? v1::HealthResponse::STATUS_NOT_SERVING
                  : !health.all_expected_alive ? v1::HealthResponse::STATUS_DEGRADED
                                               : v1::HealthResponse::STATUS_SERVING);
  for (const std::string& problem : health.problems) out->add_problems(problem);
}

}  // namespace baton::scheduler
