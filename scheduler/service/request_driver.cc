#include "scheduler/service/request_driver.h"

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "grpcpp/grpcpp.h"
#include "runtime/rpc/proto_conversion.h"
#include "runtime/rpc/status_conversion.h"
#include "runtime/tokenizer/text_stream.h"

namespace baton::scheduler {
namespace {

using rpc::NowMicros;

// Turns a request's generated token ids into streamed responses: incremental detokenization, stop
// strings, the token and logprob fields, and the finish reason.
class ResponseStream {
 public:
  ResponseStream(const runtime::Tokenizer& tokenizer, std::string request_id,
                 const std::vector<int32_t>& prompt_ids, std::vector<std::string> stop_strings,
                 const ResponseSink& write)
      : text_(tokenizer, prompt_ids, std::move(stop_strings)),
        request_id_(std::move(request_id)),
        write_(write),
        prompt_ids_(prompt_ids) {}

  // Adds tokens (and their logprobs and emission times) to `response` and writes it. The response may
  // carry timing fields already. Returns false if the client is gone.
  bool Write(v1::GenerateResponse& response, std::span<const int32_t> token_ids,
             std::span<const v1::TokenLogprobs* const> logprobs, std::span<const int64_t> emit_us,
             v1::FinishReason finish_reason) {
    std::string text;
    for (size_t i = 0; i < token_ids.size() && !text_.stopped(); ++i) {
      text += text_.Append(token_ids[i]);
      response.add_token_ids(token_ids[i]);
      ++num_generated_;
      if (i < logprobs.size()) *response.add_logprobs() = *logprobs[i];
      if (i < emit_us.size()) response.mutable_timing()->add_token_emit_us(emit_us[i]);
    }
    if (!text_.stopped() && finish_reason != v1::FINISH_REASON_UNSPECIFIED) text += text_.Finish();
    if (text_.stopped()) finish_reason = v1::FINISH_REASON_STOP;
    response.set_request_id(request_id_);
    response.set_text(std::move(text));
    response.set_finish_reason(finish_reason);
    finished_ = finish_reason != v1::FINISH_REASON_UNSPECIFIED;
    if (finished_) {
      for (int32_t id : prompt_ids_) response.add_prompt_token_ids(id);
      response.set_num_prompt_tokens(static_cast<int32_t>(prompt_ids_.size()));
      response.set_num_generated_tokens(num_generated_);
    }
    return write_(response);
  }

  bool finished() const { return finished_; }

 private:
  runtime::TextStream text_;
  std::string request_id_;
  const ResponseSink& write_;
  std::vector<int32_t> prompt_ids_;
  int32_t num_generated_ = 0;
  bool finished_ = false;
};

constexpr auto kControlDeadline = std::chrono::seconds(2);

// A worker that failed a call this way is gone (process dead or unreachable).
bool WorkerUnreachable(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE &&
         !absl::StrContains(status.error_message(), "draining");
}

}  // namespace

RequestDriver::RequestDriver(const ServedModel* model, WorkerRegistry* registry, bool disaggregated,
                             absl::Duration kv_lease, AdmissionPolicy admission)
    : model_(model),
      registry_(registry),
      disaggregated_(disaggregated),
      kv_lease_(kv_lease),
      admission_(admission) {}

v1::WorkerService::Stub* RequestDriver::StubFor(const WorkerRef& worker) {
  absl::MutexLock lock(&mu_);
  auto& stub = stubs_[worker.address];
  if (stub == nullptr) {
    stub = v1::WorkerService::NewStub(
        grpc::CreateChannel(worker.address, grpc::InsecureChannelCredentials()));
  }
  return stub.get();
}

std::string RequestDriver::NewRequestId() const {
  absl::MutexLock lock(&mu_);
  return absl::StrCat("req-", NowMicros(), "-", next_request_id_++);
}

absl::StatusOr<PreparedRequest> RequestDriver::Prepare(const v1::GenerateRequest& proto) const {
  const int64_t arrival_us = NowMicros();
  absl::StatusOr<rpc::InferenceRequest> request = rpc::FromProto(proto);
  if (!request.ok()) return request.status();
  if (!request->model.empty() && request->model != model_->name) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", request->model, "' is not served here (serving '",
                                     model_->name, "')"));
  }
  std::vector<int32_t> prompt = request->prompt_ids
                                    ? *request->prompt_ids
                                    : model_->tokenizer->Encode(*request->prompt_text, true);
  const int vocab_size = model_->config.vocab_size;
  for (int32_t id : prompt) {
    if (id < 0 || id >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt: token id ", id, " is outside the vocabulary [0, ",
                                       vocab_size, ")"));
    }
  }
  const int num_prompt_tokens = static_cast<int>(prompt.size());
  if (num_prompt_tokens == 0) {
    return absl::InvalidArgumentError("prompt: no tokens");
  }
  if (num_prompt_tokens >= model_->max_model_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt length ", num_prompt_tokens,
                                     " leaves no room in max_model_len ", model_->max_model_len));
  }
  runtime::GenerationParams& params = request->params;
  if (!request->max_tokens_given) {
    params.max_tokens = model_->max_model_len - num_prompt_tokens;
  } else if (num_prompt_tokens + params.max_tokens > model_->max_model_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt length ", num_prompt_tokens, " + max_tokens ",
                                     params.max_tokens, " exceeds max_model_len ",
                                     model_->max_model_len));
  }
  if (!proto.sampling().has_seed()) params.seed = static_cast<uint64_t>(arrival_us);
  if (absl::Status admitted = Admit(num_prompt_tokens); !admitted.ok()) return admitted;
  if (request->request_id.empty()) request->request_id = NewRequestId();
  return PreparedRequest{.request = *std::move(request), .prompt = std::move(prompt),
                         .arrival_us = arrival_us};
}

absl::Status RequestDriver::Admit(int64_t num_prompt_tokens) const {
  if (!admission_.enabled()) return absl::OkStatus();
  AdmissionRequest request{.num_prompt_tokens = num_prompt_tokens};
  const std::optional<RoutingDecision> prefill =
      disaggregated_ ? PickPrefill(registry_->LiveInstances(WorkerRole::kPrefill))
                     : PickColocated(registry_->LiveInstances(WorkerRole::kColocated));
  if (prefill) request.prefill_instance = registry_->LoadOf(prefill->worker);
  request.decode_instances =
      registry_->LiveLoads(disaggregated_ ? WorkerRole::kDecode : WorkerRole::kColocated);
  AdmissionDecision decision = DecideAdmission(admission_, latency_model_, request);
  absl::MutexLock lock(&admission_mu_);
  ++num_checked_;
  if (!decision.status.ok()) {
    ++num_rejected_;
    last_rejection_ = std::string(decision.status.message());
  }
  return decision.status;
}

void RequestDriver::ObserveEmissions(const WorkerRef& decoder, const std::string& decoder_name,
                                     const v1::TokenChunk& chunk, int64_t* last_emit_us) {
  for (const int64_t emit_us : chunk.emit_us()) {
    if (*last_emit_us != 0) {
      latency_model_.ObserveDecodeStep(decoder_name, registry_->NumActive(decoder.incarnation_id),
                                       emit_us - *last_emit_us);
    }
    *last_emit_us = emit_us;
  }
}

std::string RequestDriver::TakeAdmissionReport() {
  std::vector<std::string> parts;
  if (admission_.enabled()) {
    absl::MutexLock lock(&admission_mu_);
    auto slo = [](const std::optional<double>& ms) {
      return ms ? absl::StrCat(FormatMs(*ms), " ms") : std::string("off");
    };
    std::string part = absl::StrCat("admission (TTFT SLO ", slo(admission_.ttft_ms), ", TPOT SLO ",
                                    slo(admission_.tpot_ms), "): rejected ", num_rejected_, " of ",
                                    num_checked_, " requests");
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

grpc::Status RequestDriver::Run(const v1::GenerateRequest& proto, const ContextFactory& make_context,
                                const ResponseSink& write, const std::function<bool()>& is_cancelled) {
  absl::StatusOr<PreparedRequest> prepared = Prepare(proto);
  if (!prepared.ok()) return rpc::ToGrpcStatus(prepared.status());
  return Execute(*std::move(prepared), make_context, write, is_cancelled);
}

grpc::Status RequestDriver::Execute(PreparedRequest prepared, const ContextFactory& make_context,
                                    const ResponseSink& write,
                                    const std::function<bool()>& is_cancelled) {
  const std::vector<int32_t>& prompt = prepared.prompt;
  const int num_prompt_tokens = static_cast<int>(prompt.size());
  const runtime::GenerationParams& params = prepared.request.params;
  const std::string& request_id = prepared.request.request_id;
  const int64_t arrival_us = prepared.arrival_us;
  const rpc::InferenceRequest* request = &prepared.request;
  ResponseStream stream(*model_->tokenizer, request_id, prompt, request->stop_strings, write);

  v1::SamplingParams sampling;
  v1::StopConditions stop;
  rpc::ToProto(params, &sampling, &stop);

  v1::DecodeRequest decode_request;
  decode_request.set_request_id(request_id);
  decode_request.mutable_prompt_token_ids()->Assign(prompt.begin(), prompt.end());
  *decode_request.mutable_sampling() = sampling;
  *decode_request.mutable_stop() = stop;
  decode_request.set_logprobs(params.num_logprobs);
  decode_request.set_seed(params.seed);

  std::optional<WorkerRef> prefill;
  v1::GenerateResponse pending;  // timing that rides on the next response
  pending.mutable_timing()->set_arrival_us(arrival_us);
  if (disaggregated_) {
    if (auto pick = PickPrefill(registry_->LiveInstances(WorkerRole::kPrefill))) prefill = pick->worker;
    if (!prefill) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no live prefill worker");
    v1::PrefillRequest prefill_request;
    prefill_request.set_request_id(request_id);
    prefill_request.mutable_prompt_token_ids()->Assign(prompt.begin(), prompt.end());
    *prefill_request.mutable_sampling() = sampling;
    *prefill_request.mutable_stop() = stop;
    prefill_request.set_logprobs(params.num_logprobs);
    prefill_request.set_seed(params.seed);
    prefill_request.set_kv_lease_ms(absl::ToInt64Milliseconds(kv_lease_));
    v1::PrefillResponse prefilled;
    registry_->AddPrefillLoad(prefill->incarnation_id, num_prompt_tokens);
    const std::unique_ptr<grpc::ClientContext> prefill_context =
        make_context();
    const grpc::Status status = StubFor(*prefill)->Prefill(prefill_context.get(), prefill_request, &prefilled);
    registry_->AddPrefillLoad(prefill->incarnation_id, -num_prompt_tokens);
    if (!status.ok()) {
      if (WorkerUnreachable(status)) {
        registry_->MarkDead(prefill->incarnation_id, status.error_message());
        return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            absl::StrCat(WorkerName(prefill->role, prefill->instance_idx),
                                         " failed: ", status.error_message()));
      }
      return status;
    }
    pending.mutable_timing()->set_prefill_start_us(prefilled.prefill_start_us());
    pending.mutable_timing()->set_prefill_end_us(prefilled.prefill_end_us());
    latency_model_.ObservePrefill(WorkerName(prefill->role, prefill->instance_idx), num_prompt_tokens,
                                  prefilled.prefill_start_us(), prefilled.prefill_end_us());
    const int32_t first = prefilled.first_token_id();
    const int64_t first_emit_us = prefilled.prefill_end_us();
    const v1::TokenLogprobs* first_logprobs = &prefilled.first_logprobs();
    if (!stream.Write(pending, {&first, 1}, {&first_logprobs, prefilled.has_first_logprobs() ? 1u : 0u},
                      {&first_emit_us, 1}, prefilled.finish_reason()) ||
        stream.finished()) {
      if (prefilled.finish_reason() == v1::FINISH_REASON_UNSPECIFIED) {
        grpc::ClientContext release_context;
        release_context.set_deadline(std::chrono::system_clock::now() + kControlDeadline);
        v1::ReleaseRequest release;
        release.set_request_id(request_id);
        v1::ReleaseResponse released;
        (void)StubFor(*prefill)->Release(&release_context, release, &released);
      }
      return stream.finished() ? grpc::Status::OK
                               : grpc::Status(grpc::StatusCode::CANCELLED, "client gone");
    }
    pending.Clear();
    decode_request.add_generated_token_ids(first);
    *decode_request.mutable_kv_source() = prefilled.kv();
  }

  // The decode phase (or the whole request, colocated).
  std::optional<WorkerRef> decoder;
  if (auto pick = disaggregated_
                      ? PickDecode(registry_->LiveInstances(WorkerRole::kDecode), num_prompt_tokens)
                      : PickColocated(registry_->LiveInstances(WorkerRole::kColocated))) {
    decoder = pick->worker;
  }
  bool kv_released = !disaggregated_;
  auto release_prefill = [&] {
    if (kv_released) return;
    kv_released = true;
    grpc::ClientContext release_context;
    release_context.set_deadline(std::chrono::system_clock::now() + kControlDeadline);
    v1::ReleaseRequest release;
    release.set_request_id(request_id);
    v1::ReleaseResponse released;
    (void)StubFor(*prefill)->Release(&release_context, release, &released);
  };
  if (!decoder) {
    release_prefill();
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        disaggregated_ ? "no live decode worker" : "no live colocated worker");
  }
  registry_->AddActive(decoder->incarnation_id, 1);
  const std::string decoder_name = WorkerName(decoder->role, decoder->instance_idx);
  // Colocated: the prompt counts as outstanding prefill work on the instance until its first token.
  bool prefill_outstanding = !disaggregated_;
  if (prefill_outstanding) registry_->AddPrefillLoad(decoder->incarnation_id, num_prompt_tokens);
  auto prefill_done = [&] {
    if (!prefill_outstanding) return;
    prefill_outstanding = false;
    registry_->AddPrefillLoad(decoder->incarnation_id, -num_prompt_tokens);
  };
  int64_t last_emit_us = 0;
  const std::unique_ptr<grpc::ClientContext> decode_context =
      make_context();
  std::unique_ptr<grpc::ClientReader<v1::DecodeEvent>> reader =
      StubFor(*decoder)->Decode(decode_context.get(), decode_request);
  v1::DecodeEvent event;
  bool client_gone = false;
  while (!stream.finished() && reader->Read(&event)) {
    if (event.has_kv_transferred()) {
      pending.mutable_timing()->set_kv_transfer_start_us(event.kv_transferred().start_us());
      pending.mutable_timing()->set_kv_transfer_end_us(event.kv_transferred().end_us());
      release_prefill();
      continue;
    }
    const v1::TokenChunk& chunk = event.tokens();
    if (chunk.prefill_start_us() != 0) {
      pending.mutable_timing()->set_prefill_start_us(chunk.prefill_start_us());
      pending.mutable_timing()->set_prefill_end_us(chunk.prefill_end_us());
      latency_model_.ObservePrefill(decoder_name, num_prompt_tokens, chunk.prefill_start_us(),
                                    chunk.prefill_end_us());
    }
    if (chunk.token_ids_size() > 0) prefill_done();
    ObserveEmissions(*decoder, decoder_name, chunk, &last_emit_us);
    std::vector<const v1::TokenLogprobs*> logprobs;
    for (const auto& lp : chunk.logprobs()) logprobs.push_back(&lp);
    if (!stream.Write(pending, {chunk.token_ids().data(), static_cast<size_t>(chunk.token_ids_size())},
                      logprobs, {chunk.emit_us().data(), static_cast<size_t>(chunk.emit_us_size())},
                      chunk.finish_reason())) {
      client_gone = true;
      break;
    }
    pending.Clear();
  }
  if (stream.finished() || client_gone) decode_context->TryCancel();
  const grpc::Status status = reader->Finish();
  release_prefill();
  prefill_done();
  registry_->AddActive(decoder->incarnation_id, -1);
  if (stream.finished()) return grpc::Status::OK;
  if (client_gone || is_cancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "client cancelled");
  }
  if (status.ok()) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "decode stream ended without a finish reason");
  }
  if (WorkerUnreachable(status)) {
    registry_->MarkDead(decoder->incarnation_id, status.error_message());
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrCat(WorkerName(decoder->role, decoder->instance_idx), " failed: ",
                                     status.error_message()));
  }
  return status;
}

}  // namespace baton::scheduler
