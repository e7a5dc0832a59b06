// RequestMetrics: what one request's life measured, in native form: token counts, the outcome, and
// the timestamps of its phases. The scheduler's Prometheus metrics (scheduler/service/metrics.h)
// and its per-request log line (RequestLogLine) are both made from it; nothing here knows either
// wire format.
//
// RequestMetricsRecorder builds one from the chunks the request's flow writes to its client (the
// timestamps ride on them: generate_chunk.h ServerTiming), so it sees exactly what the client saw.
// Clocks: arrival, first token and end are the scheduler's own (when it received or wrote them);
// prefill, hand-off and token emission are the workers' stamps (one host's clock on a single
// machine; across hosts they are as good as the hosts' clock sync).
//
// A request's phases, disaggregated (colocated: queue and prefill only):
//   queue              arrival at the scheduler -> its prefill starts on a worker
//   prefill            the prefill runs; its end is the first token (TTFT ~ queue + prefill)
//   handoff_wait       the first token -> a decode worker starts pulling the KV (prefill worker
//                      holds it meanwhile: the hand-off queue)
//   kv_transfer        the pull of the KV blocks
//   first_decode_step  the KV arrived -> the decode worker emits the next token
// A phase that did not happen (the first token finished the request; a failure) is absent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/batch/sequence.h"
#include "scheduler/global/routing.h"
#include "scheduler/global/generate_chunk.h"
#include "scheduler/global/generate_request.h"

namespace baton::scheduler {

struct RequestMetrics {
  std::string request_id;         // internal
  std::string client_request_id;  // the client's, when it gave one
  int num_prompt_tokens = 0;
  int num_generated_tokens = 0;  // tokens written to the client
  absl::Status status;           // OK: finished; CANCELLED: the client left; else the failure
  runtime::FinishReason finish_reason = runtime::FinishReason::kNone;  // when OK
  // Unix microseconds; 0 when it did not happen.
  int64_t arrival_us = 0;      // scheduler: the request arrived
  int64_t first_token_us = 0;  // scheduler: the chunk with the first token was written
  int64_t end_us = 0;          // scheduler: the request ended
  int64_t prefill_start_us = 0;  // worker stamps, of the prefill that produced the first token
  int64_t prefill_end_us = 0;
  int64_t kv_transfer_start_us = 0;  // worker stamps, of the first hand-off
  int64_t kv_transfer_end_us = 0;
  int64_t kv_transfer_bytes = 0;  // every hand-off of the request
  int64_t second_token_emit_us = 0;  // worker stamp
  // Gaps between consecutive tokens' emission stamps, microseconds: [num_generated_tokens - 1]
  // when every token carried a stamp.
  std::vector<int64_t> inter_token_us;
  std::vector<RouteRecord> routes;  // every routing decision, in order
  const char* prefill_path = nullptr;  // conditional disaggregation: "local" | "remote"; nullptr: not asked
  int num_cached_tokens = 0;  // prompt tokens a prefix cache held (the last chunk's)
};

// "stop", "length", "abort" (vLLM's finished_reason labels); nullptr for kNone.
const char* FinishedReasonLabel(runtime::FinishReason reason);

// Seconds of each measured span; nullopt when one of its ends is missing (or it ran backwards).
struct RequestPhases {
  std::optional<double> ttft;  // arrival -> first token written (scheduler clock)
  std::optional<double> e2e;   // arrival -> end (scheduler clock)
  std::optional<double> queue;
  std::optional<double> prefill;
  std::optional<double> handoff_wait;
  std::optional<double> kv_transfer;
  std::optional<double> first_decode_step;
};
RequestPhases PhasesOf(const RequestMetrics& metrics);

// One line of key=value pairs (kernels/common/log.h LogValue quoting), e.g.
//   request request_id=req-1 outcome=finished finish_reason=length prompt_tokens=5
//   generated_tokens=8 ttft_ms=41.2 e2e_ms=180.3 queue_ms=0.8 prefill_ms=38.9 ...
// A failed request has outcome=failed code=UNAVAILABLE error="..."; a cancelled one
// outcome=cancelled. Phases absent from the request are left out.
std::string RequestLogLine(const RequestMetrics& metrics);

// Builds a request's RequestMetrics from the chunks written to its client. Not thread-safe (one
// request, one thread).
class RequestMetricsRecorder {
 public:
  explicit RequestMetricsRecorder(const PreparedRequest& prepared);

  // A chunk the flow wrote to the client, at now_us (scheduler clock).
  void OnChunk(const GenerateChunk& chunk, int64_t now_us);
  // The request ended with `status` at now_us.
  RequestMetrics Finish(const absl::Status& status, int64_t now_us);

 private:
  RequestMetrics metrics_;
  int64_t last_emit_us_ = 0;
  int num_emit_stamps_ = 0;
};

}  // namespace baton::scheduler
