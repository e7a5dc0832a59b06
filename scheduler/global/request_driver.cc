#include "scheduler/global/request_driver.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "kernels/common/log.h"
#include "scheduler/global/request_flow.h"
#include "scheduler/global/routing.h"

namespace baton::scheduler {
namespace {

int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

}  // namespace

RequestDriver::RequestDriver(const ServedModel* model, WorkerRegistry* registry,
                             RequestDriverOptions options)
    : model_(model), registry_(registry), options_(std::move(options)) {}

WorkerRegistry::Health RequestDriver::CheckHealth() const {
  WorkerRegistry::Health health = registry_->CheckHealth();
  if (draining()) {
    health.all_phases_served = false;
    health.problems.push_back("draining: the server is shutting down");
  }
  return health;
}

std::string RequestDriver::NewRequestId() const {
  absl::MutexLock lock(&mu_);
  return absl::StrCat("req-", NowMicros(), "-", next_request_id_++);
}

absl::StatusOr<PreparedRequest> RequestDriver::Prepare(GenerateRequest request) const {
  // At most a bounded prefix of what the client sent reaches the log.
  const std::string request_id = request.request_id.substr(0, kMaxClientRequestIdBytes);
  absl::StatusOr<PreparedRequest> prepared = PrepareUnlogged(std::move(request));
  if (!prepared.ok() && LogEnabled(LogLevel::kInfo)) {
    LogInfo(absl::StrCat("request request_id=", request_id.empty() ? "-" : LogValue(request_id),
                         " outcome=rejected code=", absl::StatusCodeToString(prepared.status().code()),
                         " error=", LogValue(prepared.status().message())));
  }
  return prepared;
}

absl::StatusOr<PreparedRequest> RequestDriver::PrepareUnlogged(GenerateRequest request) const {
  const int64_t arrival_us = NowMicros();
  if (draining()) {
    return absl::UnavailableError("the server is draining (shutting down): it takes no new requests");
  }
  if (absl::Status valid = ValidateRequest(request); !valid.ok()) return valid;
  if (!request.model.empty() && !model_->IsNamed(request.model)) {
    // vLLM's words and code (404 over HTTP), so that clients written against it recognise them.
    return absl::NotFoundError(absl::StrCat("The model `", request.model, "` does not exist."));
  }
  if (request.chat) {
    absl::StatusOr<std::string> text = RenderChatPrompt(model_->chat_template, *request.chat);
    if (!text.ok()) return text.status();
    request.prompt_text = *std::move(text);
    request.add_special_tokens = false;  // the template writes them
    request.chat.reset();
  }
  std::vector<int32_t> prompt = request.prompt_ids
                                    ? *request.prompt_ids
                                    : model_->tokenizer->Encode(*request.prompt_text, request.add_special_tokens);
  const int vocab_size = model_->config.vocab_size;
  for (int32_t id : prompt) {
    if (id < 0 || id >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt: token id ", id, " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  for (const auto& [id, bias] : request.params.logits_processors.logit_bias) {
    if (id >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sampling.logit_bias: token id ", id, " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  if (request.params.constraint.active()) {
    if (!model_->constraint_compiler.ok()) return model_->constraint_compiler.status();
    const absl::Status compiled = (*model_->constraint_compiler)->Compile(request.params.constraint).status();
    if (!compiled.ok()) {
      return absl::Status(compiled.code(), absl::StrCat("structured outputs: ", compiled.message()));
    }
  }
  const int num_prompt_tokens = static_cast<int>(prompt.size());
  if (num_prompt_tokens == 0) {
    return absl::InvalidArgumentError("prompt: no tokens");
  }
  if (num_prompt_tokens >= model_->max_model_len) {
    return absl::InvalidArgumentError(absl::StrCat("prompt length ", num_prompt_tokens,
                                                   " leaves no room in max_model_len ",
                                                   model_->max_model_len));
  }
  runtime::GenerationParams& params = request.params;
  if (!request.max_tokens_given) {
    params.max_tokens = model_->max_model_len - num_prompt_tokens;
  } else if (int64_t{num_prompt_tokens} + params.max_tokens > model_->max_model_len) {  // no wrap
    return absl::InvalidArgumentError(absl::StrCat("prompt length ", num_prompt_tokens,
                                                   " + max_tokens ", params.max_tokens,
                                                   " exceeds max_model_len ", model_->max_model_len));
  }
  if (params.logits_processors.min_tokens > params.max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("stop.min_tokens ", params.logits_processors.min_tokens,
                                                   " must be <= max_tokens ", params.max_tokens));
  }
  if (!request.seed_given) params.seed = static_cast<uint64_t>(arrival_us);
  // What the client left out follows the model's generation_config.json, as in vLLM (checked at
  // load, so nothing to validate again here).
  const kernels::SamplingOptions& defaults = model_->default_sampling;
  if (!request.temperature_given) params.sampling.temperature = defaults.temperature;
  if (!request.top_k_given) params.sampling.top_k = defaults.top_k;
  if (!request.top_p_given) params.sampling.top_p = defaults.top_p;
  if (absl::Status admitted = Admit(prompt); !admitted.ok()) return admitted;
  request.client_request_id = std::move(request.request_id);
  request.request_id = NewRequestId();
  return PreparedRequest{.request = std::move(request), .prompt = std::move(prompt),
                         .arrival_us = arrival_us};
}

absl::Status RequestDriver::Admit(const std::vector<int32_t>& prompt) const {
  if (!options_.admission.enabled()) return absl::OkStatus();
  const int num_prompt_tokens = static_cast<int>(prompt.size());
  AdmissionRequest request{.num_prompt_tokens = num_prompt_tokens};
  // The instance the flow would send the prefill to now (routing.h).
  PromptHashes hashes(prompt);
  const std::vector<InstanceSnapshot> live =
      registry_->LiveInstances(options_.disaggregated ? WorkerRole::kPrefill : WorkerRole::kColocated, &hashes);
  const std::optional<RoutingDecision> prefill = options_.disaggregated ? PickPrefill(live, num_prompt_tokens)
                                                                        : PickColocated(live, num_prompt_tokens);
  if (prefill) {
    request.prefill_instance = registry_->LoadOf(prefill->worker);
    for (const InstanceSnapshot& instance : live) {
      if (instance.worker.incarnation_id != prefill->worker.incarnation_id) continue;
      request.num_prompt_tokens = std::max(num_prompt_tokens - instance.num_cached_tokens, 1);
    }
  }
  request.decode_instances =
      registry_->LiveLoads(options_.disaggregated ? WorkerRole::kDecode : WorkerRole::kColocated);
  AdmissionDecision decision = DecideAdmission(options_.admission, latency_model_, request);
  absl::MutexLock lock(&admission_mu_);
  ++num_checked_;
  if (!decision.status.ok()) {
    ++num_rejected_;
    last_rejection_ = std::string(decision.status.message());
  }
  return decision.status;
}

std::string RequestDriver::TakeAdmissionReport() {
  std::vector<std::string> parts;
  if (options_.admission.enabled()) {
    absl::MutexLock lock(&admission_mu_);
    auto slo = [](const std::optional<double>& ms) {
      return ms ? absl::StrCat(FormatMs(*ms), " ms") : std::string("off");
    };
    std::string part = absl::StrCat("admission (TTFT SLO ", slo(options_.admission.ttft_ms),
                                    ", TPOT SLO ", slo(options_.admission.tpot_ms), "): rejected ",
                                    num_rejected_, " of ", num_checked_, " requests");
    if (num_rejected_ > 0) absl::StrAppend(&part, " (last: ", last_rejection_, ")");
    parts.push_back(std::move(part));
    num_checked_ = 0;
    num_rejected_ = 0;
  }
  for (const InstanceEstimate& estimate : latency_model_.Estimates()) {
    std::string part = absl::StrCat(estimate.name, ":");
    if (estimate.prefill_tokens_per_s) {
      absl::StrAppend(&part, " prefill ", absl::StrFormat("%.0f", *estimate.prefill_tokens_per_s),
                      " tokens/s (", estimate.num_prefill_samples, " steps)");
    }
    if (estimate.decode) {
      absl::StrAppend(&part, " decode step ", FormatMs(estimate.decode->intercept_ms), " ms + ",
                      FormatMs(estimate.decode->slope_ms), " ms per request (last ",
                      estimate.decode->num_observations, " tokens)");
    }
    parts.push_back(std::move(part));
  }
  return absl::StrJoin(parts, "; ");
}

absl::Status RequestDriver::Run(GenerateRequest request, const RequestIo& io) {
  absl::StatusOr<PreparedRequest> prepared = Prepare(std::move(request));
  if (!prepared.ok()) return prepared.status();
  return Execute(*std::move(prepared), io);
}

absl::Status RequestDriver::Execute(PreparedRequest prepared, const RequestIo& io) {
  ++num_executing_;
  absl::Cleanup done = [this] { --num_executing_; };
  RequestMetricsRecorder recorder(prepared);
  ChunkSink write = [&recorder, &io](const GenerateChunk& chunk) {
    recorder.OnChunk(chunk, NowMicros());
    return io.write(chunk);
  };
  RequestFlow flow(RequestFlowParams{.tokenizer = model_->tokenizer.get(),
                                     .registry = registry_,
                                     .latency_model = &latency_model_,
                                     .workers = io.workers,
                                     .disaggregated = options_.disaggregated,
                                     .kv_lease = options_.kv_lease,
                                     .max_local_prefill_tokens =
                                         options_.disaggregated ? options_.max_local_prefill_tokens : 0,
                                     .kv_aware_routing = options_.kv_aware_routing,
                                     .write = std::move(write),
                                     .is_cancelled = io.is_cancelled},
                   std::move(prepared));
  const absl::Status status = flow.Run();
  RequestMetrics metrics = recorder.Finish(status, NowMicros());
  metrics.routes = flow.routes();
  metrics.prefill_path = flow.prefill_path();
  if (LogEnabled(LogLevel::kInfo)) LogInfo(RequestLogLine(metrics));
  if (options_.on_request_done) options_.on_request_done(metrics);
  return status;
}

}  // namespace baton::scheduler
