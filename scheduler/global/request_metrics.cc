#include "scheduler/global/request_metrics.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/common/log.h"

namespace baton::scheduler {
namespace {

std::optional<double> Span(int64_t begin_us, int64_t end_us) {
  if (begin_us == 0 || end_us == 0 || end_us < begin_us) return std::nullopt;
  return static_cast<double>(end_us - begin_us) * 1e-6;
}

}  // namespace

const char* FinishedReasonLabel(runtime::FinishReason reason) {
  switch (reason) {
    case runtime::FinishReason::kStop: return "stop";
    case runtime::FinishReason::kLength: return "length";
    case runtime::FinishReason::kCancelled: return "abort";
    case runtime::FinishReason::kNone: return nullptr;
  }
  return nullptr;
}

RequestPhases PhasesOf(const RequestMetrics& m) {
  return RequestPhases{.ttft = Span(m.arrival_us, m.first_token_us),
                       .e2e = Span(m.arrival_us, m.end_us),
                       .queue = Span(m.arrival_us, m.prefill_start_us),
                       .prefill = Span(m.prefill_start_us, m.prefill_end_us),
                       .handoff_wait = Span(m.prefill_end_us, m.kv_transfer_start_us),
                       .kv_transfer = Span(m.kv_transfer_start_us, m.kv_transfer_end_us),
                       .first_decode_step = Span(m.kv_transfer_end_us, m.second_token_emit_us)};
}

std::string RequestLogLine(const RequestMetrics& m) {
  std::string line = absl::StrCat("request request_id=", LogValue(m.request_id));
  if (!m.client_request_id.empty()) absl::StrAppend(&line, " client_request_id=", LogValue(m.client_request_id));
  if (m.status.ok()) {
    const char* reason = FinishedReasonLabel(m.finish_reason);
    absl::StrAppend(&line, " outcome=finished finish_reason=", reason ? reason : "none");
  } else if (absl::IsCancelled(m.status)) {
    absl::StrAppend(&line, " outcome=cancelled");
  } else {
    absl::StrAppend(&line, " outcome=failed code=", absl::StatusCodeToString(m.status.code()),
                    " error=", LogValue(m.status.message()));
  }
  absl::StrAppend(&line, " prompt_tokens=", m.num_prompt_tokens, " generated_tokens=",
                  m.num_generated_tokens);
  const RequestPhases phases = PhasesOf(m);
  auto field = [&line](const char* key, const std::optional<double>& seconds) {
    if (seconds) absl::StrAppendFormat(&line, " %s_ms=%.3f", key, *seconds * 1e3);
  };
  field("ttft", phases.ttft);
  field("e2e", phases.e2e);
  field("queue", phases.queue);
  field("prefill", phases.prefill);
  field("handoff_wait", phases.handoff_wait);
  field("kv_transfer", phases.kv_transfer);
  field("first_decode_step", phases.first_decode_step);
  if (m.kv_transfer_bytes > 0) absl::StrAppend(&line, " kv_transfer_bytes=", m.kv_transfer_bytes);
  if (!m.inter_token_us.empty()) {
    int64_t sum = 0;
    for (const int64_t gap : m.inter_token_us) sum += gap;
    absl::StrAppendFormat(&line, " mean_itl_ms=%.3f",
                          static_cast<double>(sum) * 1e-3 / static_cast<double>(m.inter_token_us.size()));
  }
  return line;
}

RequestMetricsRecorder::RequestMetricsRecorder(const PreparedRequest& prepared) {
  metrics_.request_id = prepared.request.request_id;
  metrics_.client_request_id = prepared.request.client_request_id;
  metrics_.num_prompt_tokens = static_cast<int>(prepared.prompt.size());
  metrics_.arrival_us = prepared.arrival_us;
}

void RequestMetricsRecorder::OnChunk(const GenerateChunk& chunk, int64_t now_us) {
  const ServerTiming& timing = chunk.timing;
  // The first of each stamp wins: a request that resumes after a worker failure prefills (and may
  // hand off) again, but its client's first token came from the first prefill.
  if (metrics_.prefill_start_us == 0 && timing.prefill_start_us != 0) {
    metrics_.prefill_start_us = timing.prefill_start_us;
    metrics_.prefill_end_us = timing.prefill_end_us;
  }
  if (metrics_.kv_transfer_start_us == 0 && timing.kv_transfer_start_us != 0) {
    metrics_.kv_transfer_start_us = timing.kv_transfer_start_us;
    metrics_.kv_transfer_end_us = timing.kv_transfer_end_us;
  }
  metrics_.kv_transfer_bytes += timing.kv_transfer_bytes;
  if (!chunk.token_ids.empty() && metrics_.first_token_us == 0) metrics_.first_token_us = now_us;
  for (const int64_t emit_us : timing.token_emit_us) {
    if (num_emit_stamps_ == 1) metrics_.second_token_emit_us = emit_us;
    if (last_emit_us_ != 0 && emit_us >= last_emit_us_) metrics_.inter_token_us.push_back(emit_us - last_emit_us_);
    last_emit_us_ = emit_us;
    ++num_emit_stamps_;
  }
  metrics_.num_generated_tokens += static_cast<int>(chunk.token_ids.size());
  if (chunk.finish_reason != runtime::FinishReason::kNone) {
    metrics_.finish_reason = chunk.finish_reason;
    metrics_.num_cached_tokens = chunk.num_cached_tokens;
  }
}

RequestMetrics RequestMetricsRecorder::Finish(const absl::Status& status, int64_t now_us) {
  metrics_.status = status;
  metrics_.end_us = now_us;
  return std::move(metrics_);
}

}  // namespace baton::scheduler
