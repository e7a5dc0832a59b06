#include "scheduler/global/request_flow.h"

#include <span>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kernels/common/log.h"
#include "runtime/worker/worker_draining.h"

namespace baton::scheduler {
namespace {

// A worker that failed a call this way is gone (process dead or unreachable). One that is draining
// answers UNAVAILABLE too, but it is alive and finishes what it has (worker_draining.h).
bool WorkerUnreachable(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable && !runtime::IsWorkerDraining(status);
}

bool IsTerminal(FlowState state) {
  return state == FlowState::kFinished || state == FlowState::kFailed ||
         state == FlowState::kCancelled;
}

}  // namespace

const char* FlowStateName(FlowState state) {
  switch (state) {
    case FlowState::kPrefilling: return "prefilling";
    case FlowState::kHandingOff: return "handing off";
    case FlowState::kDecoding: return "decoding";
    case FlowState::kFinished: return "finished";
    case FlowState::kFailed: return "failed";
    case FlowState::kCancelled: return "cancelled";
  }
  return "?";
}

RequestFlow::RequestFlow(RequestFlowParams params, PreparedRequest prepared)
    : params_(std::move(params)),
      prepared_(std::move(prepared)),
      stream_(*params_.tokenizer, EchoedRequestId(prepared_.request), prepared_.prompt,
              prepared_.request.stop_strings, prepared_.request.params.logits_processors.min_tokens,
              prepared_.request.include_stop_str_in_output, &params_.write,
              prepared_.request.skip_special_tokens, prepared_.request.params.stop_token_ids),
      num_prompt_tokens_(static_cast<int>(prepared_.prompt.size())),
      state_(params_.disaggregated ? FlowState::kPrefilling : FlowState::kDecoding) {
  pending_.timing.arrival_us = prepared_.arrival_us;
}

absl::Status RequestFlow::Run() {
  trace_.push_back(state_);
  while (!IsTerminal(state_)) {
    // Prefill ends in kHandingOff; StartDecode runs the decode stream to the request's end (and
    // enters kDecoding itself when the KV arrives).
    const FlowState next = state_ == FlowState::kPrefilling ? Prefill() : StartDecode();
    if (next != state_) Enter(next);
  }
  return status_;
}

void RequestFlow::Enter(FlowState state) {
  state_ = state;
  trace_.push_back(state);
}

FlowState RequestFlow::End(absl::Status status) {
  status_ = std::move(status);
  if (status_.ok()) return FlowState::kFinished;
  return status_.code() == absl::StatusCode::kCancelled ? FlowState::kCancelled : FlowState::kFailed;
}

absl::Status RequestFlow::WorkerFailed(const WorkerRef& worker, const absl::Status& status) {
  if (!WorkerUnreachable(status)) return status;
  params_.registry->MarkDead(worker.incarnation_id, std::string(status.message()));
  return absl::UnavailableError(
      absl::StrCat(WorkerName(worker.role, worker.instance_idx), " failed: ", status.message()));
}

CallOptions RequestFlow::CallTo(const WorkerRef& worker) const {
  WorkerRegistry* registry = params_.registry;
  return CallOptions{.deadline = absl::Now() + params_.max_call_duration,
                     .abandon = [registry, worker] { return !registry->LoadOf(worker).has_value(); }};
}

CallOptions RequestFlow::HandOffCallTo(const WorkerRef& decoder) {
  kv_pulled_ = false;
  kv_source_lost_ = false;
  WorkerRegistry* registry = params_.registry;
  return CallOptions{
      .deadline = absl::Now() + params_.max_call_duration,
      .abandon = [this, registry, decoder, source = *prefill_] {
        if (!registry->LoadOf(decoder).has_value()) return true;
        if (kv_pulled_ || registry->LoadOf(source).has_value()) return false;
        kv_source_lost_ = true;
        return true;
      }};
}

int RequestFlow::NumContextTokens() const {
  return num_prompt_tokens_ + static_cast<int>(generated_.size());
}

void RequestFlow::ReleasePrefillKv() {
  if (!prefill_kv_held_) return;
  prefill_kv_held_ = false;
  // Best effort: a worker that misses it frees the KV when the lease expires.
  (void)params_.workers->Release(*prefill_, prepared_.request.request_id,
                                 CallOptions{.deadline = absl::Now() + params_.release_deadline});
}

std::optional<RoutingDecision> RequestFlow::Route(WorkerRole role, int* num_cached_tokens) {
  const absl::Time give_up = absl::Now() + params_.worker_wait;
  std::vector<int32_t> context = prepared_.prompt;
  context.insert(context.end(), generated_.begin(), generated_.end());
  PromptHashes hashes(std::move(context));
  PromptHashes* const prompt = params_.kv_aware_routing ? &hashes : nullptr;
  const int num_tokens = NumContextTokens();
  while (true) {
    // A prefill's pick is charged its prompt at once (Prefill takes it off when the call ends).
    const std::vector<InstanceSnapshot> live =
        role == WorkerRole::kPrefill ? std::vector<InstanceSnapshot>() : params_.registry->LiveInstances(role, prompt);
    const std::optional<RoutingDecision> pick =
        role == WorkerRole::kPrefill  ? params_.registry->PickPrefillAndCharge(prompt, num_tokens)
        : role == WorkerRole::kDecode ? PickDecode(live, num_tokens)
                                      : PickColocated(live, num_tokens);
    if (pick) {
      routes_.push_back(RouteRecord{.role = role, .label = pick->label});
      for (const InstanceSnapshot& instance : live) {
        if (num_cached_tokens != nullptr && instance.worker.incarnation_id == pick->worker.incarnation_id) {
          *num_cached_tokens = instance.num_cached_tokens;
        }
      }
      if (LogEnabled(LogLevel::kDebug)) {
        LogDebug(absl::StrCat("request ", prepared_.request.request_id, ": ", runtime::WorkerRoleName(role), " on ",
                              WorkerName(pick->worker.role, pick->worker.instance_idx), ": ", pick->reason));
      }
    }
    if (pick || absl::Now() >= give_up || params_.is_cancelled()) return pick;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

FlowState RequestFlow::NoLiveWorker(WorkerRole role) {
  if (params_.is_cancelled()) return End(absl::CancelledError("client cancelled"));
  std::string message = absl::StrCat("no live ", runtime::WorkerRoleName(role), " worker (waited ",
                                     absl::FormatDuration(params_.worker_wait), ")");
  if (!last_failure_.empty()) absl::StrAppend(&message, " after ", last_failure_);
  return End(absl::UnavailableError(message));
}

FlowState RequestFlow::Retry(FlowState retry, absl::Status failure) {
  last_failure_ = std::string(failure.message());
  const absl::Time now = absl::Now();
  if (num_failures_++ == 0) first_failure_ = now;
  if (now - first_failure_ >= params_.retry_deadline) {
    return End(absl::Status(
        failure.code(), absl::StrCat(failure.message(), " (", num_failures_, " worker failures over ",
                                     absl::FormatDuration(now - first_failure_), "; gave up at the retry deadline of ",
                                     absl::FormatDuration(params_.retry_deadline), ")")));
  }
  if (params_.is_cancelled()) return End(absl::CancelledError("client cancelled"));
  LogInfo(absl::StrCat("request ", prepared_.request.request_id, ": ", failure.message(), "; ",
                       FlowStateName(retry), " again (worker failure ", num_failures_, ", retried for up to ",
                       absl::FormatDuration(params_.retry_deadline - (now - first_failure_)), " more)"));
  return retry;
}

void RequestFlow::PrefillDone() {
  if (!colocated_prefill_outstanding_) return;
  colocated_prefill_outstanding_ = false;
  params_.registry->AddPrefillLoad(decoder_->incarnation_id, -colocated_prefill_tokens_);
}

FlowState RequestFlow::Prefill() {
  // Conditional disaggregation: a prompt whose part the chosen decode instance does not hold is
  // short is prefilled there, with no hand-off (Dynamo's and llm-d's decider).
  if (params_.max_local_prefill_tokens > 0) {
    int num_cached = 0;
    std::optional<RoutingDecision> decode = Route(WorkerRole::kDecode, &num_cached);
    if (!decode) return NoLiveWorker(WorkerRole::kDecode);
    const bool local = NumContextTokens() - num_cached <= params_.max_local_prefill_tokens;
    prefill_path_ = local ? "local" : "remote";
    if (local) {
      local_decode_ = std::move(decode);
      return FlowState::kDecoding;
    }
  }
  const std::optional<RoutingDecision> pick = Route(WorkerRole::kPrefill);
  if (!pick) return NoLiveWorker(WorkerRole::kPrefill);
  prefill_ = pick->worker;
  // A resumed request (generated_ not empty) prefills its tokens too; the token the prefill samples
  // is the next one either way.
  const bool resumed = !generated_.empty();
  const int num_context_tokens = NumContextTokens();
  const PrefillCall call{.request_id = prepared_.request.request_id,
                         .prompt_token_ids = prepared_.prompt,
                         .generated_token_ids = generated_,
                         .params = prepared_.request.params,
                         .kv_lease = params_.kv_lease};
  absl::StatusOr<PrefillResult> result = params_.workers->Prefill(*prefill_, call, CallTo(*prefill_));
  params_.registry->AddPrefillLoad(prefill_->incarnation_id, -num_context_tokens);
  if (absl::IsCancelled(result.status()) || absl::IsDeadlineExceeded(result.status())) {
    // The call ended without its answer: the worker may have finished the prefill meanwhile and
    // hold its KV for a hand-off nobody will make. Tell it none is wanted (a no-op otherwise).
    prefill_kv_held_ = true;
    ReleasePrefillKv();
  }
  if (!result.ok()) {
    const absl::Status failed = WorkerFailed(*prefill_, result.status());
    if (WorkerUnreachable(result.status())) return Retry(FlowState::kPrefilling, failed);
    return End(failed);
  }
  prefilled_ = *std::move(result);
  // A request the first token finished holds no KV on the worker.
  prefill_kv_held_ = prefilled_->finish_reason == runtime::FinishReason::kNone;
  params_.latency_model->ObservePrefill(WorkerName(prefill_->role, prefill_->instance_idx),
                                        num_context_tokens, prefilled_->prefill_start_us,
                                        prefilled_->prefill_end_us);
  if (!resumed) {  // the client's time to first token, and its prompt's scores
    pending_.timing.prefill_start_us = prefilled_->prefill_start_us;
    pending_.timing.prefill_end_us = prefilled_->prefill_end_us;
    pending_.prompt_logprobs = std::move(prefilled_->prompt_logprobs);
    stream_.set_num_cached_tokens(prefilled_->num_cached_tokens);
  }
  const int32_t token = prefilled_->first_token_id;
  generated_.push_back(token);
  const int64_t emit_us = prefilled_->prefill_end_us;
  std::span<const std::vector<kernels::TokenLogprob>> logprobs;
  if (prefilled_->first_logprobs) logprobs = {&*prefilled_->first_logprobs, 1};
  const bool written = stream_.Write(std::exchange(pending_, {}), {&token, 1}, logprobs,
                                     {&emit_us, 1}, prefilled_->finish_reason);
  if (!written || stream_.finished()) {
    ReleasePrefillKv();
    return End(stream_.finished() ? absl::OkStatus() : absl::CancelledError("client gone"));
  }
  // A client that left while the prompt ran: no decode instance needs to pull anything.
  if (params_.is_cancelled()) {
    ReleasePrefillKv();
    return End(absl::CancelledError("client cancelled"));
  }
  return FlowState::kHandingOff;
}

FlowState RequestFlow::StartDecode() {
  // Handed off: the KV comes from the prefill instance; else the instance prefills (colocated, or
  // a disaggregated request prefilled locally, on the decode instance Prefill chose).
  const bool disaggregated = params_.disaggregated && !local_decode_;
  const WorkerRole role = params_.disaggregated ? WorkerRole::kDecode : WorkerRole::kColocated;
  const std::optional<RoutingDecision> pick = local_decode_ ? std::exchange(local_decode_, std::nullopt)
                                                            : Route(role);
  if (!pick) {
    ReleasePrefillKv();
    return NoLiveWorker(role);
  }
  decoder_ = pick->worker;
  decoder_name_ = WorkerName(decoder_->role, decoder_->instance_idx);
  decode_resumed_ = !disaggregated && !generated_.empty();
  last_emit_us_ = 0;  // a gap across a failure is no decode step
  params_.registry->AddActive(decoder_->incarnation_id, 1);
  // Colocated: the prompt (and a resumed request's tokens) count as outstanding prefill work on the
  // instance until its next token.
  if (!disaggregated) {
    colocated_prefill_outstanding_ = true;
    colocated_prefill_tokens_ = NumContextTokens();
    params_.registry->AddPrefillLoad(decoder_->incarnation_id, colocated_prefill_tokens_);
  }
  DecodeCall call{.request_id = prepared_.request.request_id,
                  .prompt_token_ids = prepared_.prompt,
                  .generated_token_ids = generated_,
                  .params = prepared_.request.params};
  if (disaggregated) call.kv_source = prefilled_->kv;
  const absl::Status stream_status = params_.workers->Decode(
      *decoder_, call, disaggregated ? HandOffCallTo(*decoder_) : CallTo(*decoder_),
      [this](const DecodeEvent& event) { return OnDecodeEvent(event); });
  return EndDecode(stream_status);
}

bool RequestFlow::OnDecodeEvent(const DecodeEvent& event) {
  if (const auto* kv = std::get_if<KvTransferred>(&event)) {
    kv_pulled_ = true;
    pending_.timing.kv_transfer_start_us = kv->start_us;
    pending_.timing.kv_transfer_end_us = kv->end_us;
    pending_.timing.kv_transfer_bytes = kv->num_bytes;
    ReleasePrefillKv();
    if (state_ == FlowState::kHandingOff) Enter(FlowState::kDecoding);
    return true;
  }
  const TokenChunk& chunk = std::get<TokenChunk>(event);
  if (state_ == FlowState::kHandingOff) Enter(FlowState::kDecoding);
  if (chunk.prefill_start_us != 0) {
    if (!decode_resumed_) {  // the client's time to first token, and its prompt's scores
      pending_.timing.prefill_start_us = chunk.prefill_start_us;
      pending_.timing.prefill_end_us = chunk.prefill_end_us;
      pending_.prompt_logprobs = chunk.prompt_logprobs;
      stream_.set_num_cached_tokens(chunk.num_cached_tokens);
    }
    params_.latency_model->ObservePrefill(decoder_name_, colocated_prefill_tokens_,
                                          chunk.prefill_start_us, chunk.prefill_end_us);
  }
  if (!chunk.token_ids.empty()) PrefillDone();
  for (const int64_t emit_us : chunk.emit_us) {
    if (last_emit_us_ != 0 && !client_paced_) {
      params_.latency_model->ObserveDecodeStep(
          decoder_name_, params_.registry->NumActive(decoder_->incarnation_id),
          emit_us - last_emit_us_);
    }
    last_emit_us_ = emit_us;
  }
  generated_.insert(generated_.end(), chunk.token_ids.begin(), chunk.token_ids.end());
  const absl::Time write_start = absl::Now();
  if (!stream_.Write(std::exchange(pending_, {}), chunk.token_ids, chunk.logprobs, chunk.emit_us,
                     chunk.finish_reason)) {
    client_gone_ = true;
    return false;
  }
  // A client slower than the decode steps holds the stream back (its writes block): the gaps
  // between its tokens are then its own pace, not the instance's, and the model learns none.
  if (absl::Now() - write_start > kClientPacedWrite) client_paced_ = true;
  // Finished (a finish reason, or a stop string the worker does not know of): stop the stream.
  return !stream_.finished();
}

FlowState RequestFlow::EndDecode(const absl::Status& stream_status) {
  PrefillDone();
  params_.registry->AddActive(decoder_->incarnation_id, -1);
  const bool handing_off = state_ == FlowState::kHandingOff;
  if (stream_.finished() || client_gone_ || params_.is_cancelled() || stream_status.ok()) {
    ReleasePrefillKv();
    if (stream_.finished()) return End(absl::OkStatus());
    if (client_gone_ || params_.is_cancelled()) return End(absl::CancelledError("client cancelled"));
    return End(absl::InternalError("decode stream ended without a finish reason"));
  }
  if (handing_off && stream_status.code() == absl::StatusCode::kAborted) {
    // The pull failed because its source did: the decode instance is fine. The KV is lost with
    // its holder (a Release that reaches a live holder frees it), so the prompt runs again.
    ReleasePrefillKv();
    return Retry(FlowState::kPrefilling,
                 absl::UnavailableError(absl::StrCat(decoder_name_, ": ", stream_status.message())));
  }
  if (handing_off && kv_source_lost_) {
    // Abandoned because the source was cut off mid-pull (a frozen prefill worker): the same.
    ReleasePrefillKv();
    return Retry(FlowState::kPrefilling,
                 absl::UnavailableError(absl::StrCat(
                     "the KV source ", WorkerName(prefill_->role, prefill_->instance_idx),
                     " was cut off while ", decoder_name_, " pulled from it")));
  }
  const absl::Status failed = WorkerFailed(*decoder_, stream_status);
  if (!WorkerUnreachable(stream_status)) {
    ReleasePrefillKv();
    return End(failed);
  }
  if (handing_off && prefill_kv_held_) {
    return Retry(FlowState::kHandingOff, failed);  // the prefill instance still holds the KV
  }
  // Token replay: the tokens the client has are prefilled with the prompt on a live instance, which
  // samples the next one as this instance would have, and the stream goes on from there.
  ReleasePrefillKv();
  return Retry(params_.disaggregated ? FlowState::kPrefilling : FlowState::kDecoding, failed);
}

}  // namespace baton::scheduler
