// WorkerClient: the calls the scheduler makes to its worker instances, in native types. The gRPC
// implementation is scheduler/service/grpc_worker_client.h; tests script a fake
// (tests/scheduler/global/fake_worker_client.h).
//
// Lifecycle of one request on the workers, as RequestFlow drives it:
//   - Disaggregated: Prefill on a prefill instance returns the first token and a lease on the
//     request's KV blocks (kv). Decode on a decode instance, with kv_source = that lease, first
//     reports KvTransferred once it has pulled the blocks (it pulls only when it has room:
//     backpressure), then streams TokenChunks until one carries a finish reason. Release on the
//     prefill instance frees the blocks: after KvTransferred, or on any path that ends the request
//     while the prefill instance still holds them.
//   - Colocated: Decode without kv_source runs both phases; the first chunk carries the prefill's
//     timing.
//
// Errors: every call returns the worker's status. UNAVAILABLE means the worker is unreachable or
// going away ("draining" in the message: it refuses new work but is alive); CANCELLED means the call
// was cancelled (by the front end's client or by the handler); DEADLINE_EXCEEDED means
// options.deadline passed.
//
// Cancellation: an implementation may tie Prefill and Decode to the front end's call, so that a
// client that leaves cancels them at once (GrpcWorkerClient with a parent context does). Release is
// never tied to it: it must go through after the client left.
//
// Threading: implementations are thread-safe; one request's calls are made from one thread, in order.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "baton/kernels/sampling.h"
#include "runtime/batch/sequence.h"
#include "runtime/transfer/kv_handoff.h"
#include "scheduler/global/routing.h"

namespace baton::scheduler {

struct CallOptions {
  absl::Time deadline = absl::InfiniteFuture();
  // Polled while a Prefill or Decode call runs (every few tens of ms): once true, the callee is known
  // dead (the registry marked it so: a frozen or cut-off worker never answers), and the call ends
  // UNAVAILABLE at once. Null: never.
  std::function<bool()> abandon;
};

struct PrefillCall {
  std::string request_id;
  std::vector<int32_t> prompt_token_ids;  // [num_prompt_tokens]
  // Tokens the client has already (a request resumed after a worker died): the prefill computes
  // prompt + these and samples the next one, as the uninterrupted run would. Usually empty.
  std::vector<int32_t> generated_token_ids;
  runtime::GenerationParams params;       // max_tokens and seed resolved
  absl::Duration kv_lease;                // how long the worker holds the KV for a decode instance
};

struct PrefillResult {
  int32_t first_token_id = 0;  // the first token the prefill sampled (the next one when resumed)
  std::optional<std::vector<kernels::TokenLogprob>> first_logprobs;  // when asked for
  // When params.num_prompt_logprobs: [num_prompt_tokens], entry 0 empty (TokenOutput's).
  std::vector<std::vector<kernels::TokenLogprob>> prompt_logprobs;
  // Set when the first token ends the request (EOS, a stop id, max_tokens 1): the worker has freed
  // the KV already and there is nothing to decode.
  runtime::FinishReason finish_reason = runtime::FinishReason::kNone;
  // Where the decode instance pulls the KV from, in the model's terms: any decode layout can plan
  // its pulls from it (runtime/transfer/kv_handoff.h). Carried to Decode unchanged.
  runtime::KvHandoff kv;
  int64_t prefill_start_us = 0;
  int64_t prefill_end_us = 0;
  int num_cached_tokens = 0;  // prompt tokens whose KV the prefill took from its prefix cache
};

struct DecodeCall {
  std::string request_id;
  std::vector<int32_t> prompt_token_ids;     // [num_prompt_tokens]
  // Disaggregated: every token sampled so far (kv_source holds the KV of all but the last).
  // Colocated: the tokens the client has already, prefilled with the prompt (usually none).
  std::vector<int32_t> generated_token_ids;
  runtime::GenerationParams params;
  std::optional<runtime::KvHandoff> kv_source;  // nullopt: colocated, prefill here
};

// The decode instance holds the request's KV: the prefill instance may release it.
struct KvTransferred {
  int64_t start_us = 0;
  int64_t end_us = 0;
  int64_t num_bytes = 0;       // pulled
  int num_cached_tokens = 0;   // held by the decode instance's prefix cache already: not pulled
};

struct TokenChunk {
  std::vector<int32_t> token_ids;                            // [num_tokens]
  std::vector<std::vector<kernels::TokenLogprob>> logprobs;  // [num_tokens] when asked for
  std::vector<int64_t> emit_us;                              // [num_tokens]
  runtime::FinishReason finish_reason = runtime::FinishReason::kNone;
  // Colocated: the prefill's timing, on the first chunk only (0 otherwise).
  int64_t prefill_start_us = 0;
  int64_t prefill_end_us = 0;
  // Colocated, on the first chunk when params.num_prompt_logprobs: as PrefillResult's.
  std::vector<std::vector<kernels::TokenLogprob>> prompt_logprobs;
  int num_cached_tokens = 0;  // colocated, first chunk: as PrefillResult's
};

using DecodeEvent = std::variant<KvTransferred, TokenChunk>;
// Called for each event of a Decode stream, in order; returns false to stop reading, which cancels
// the call.
using DecodeEventHandler = std::function<bool(const DecodeEvent&)>;

class WorkerClient {
 public:
  virtual ~WorkerClient() = default;

  virtual absl::StatusOr<PrefillResult> Prefill(const WorkerRef& worker, const PrefillCall& call,
                                                const CallOptions& options) = 0;
  // Frees the request's KV on a prefill instance. Idempotent on the worker's side.
  virtual absl::Status Release(const WorkerRef& worker, const std::string& request_id,
                               const CallOptions& options) = 0;
  // Runs the stream to its end, calling on_event for each event; returns the stream's status (after
  // on_event returned false: whatever the cancelled call ends with, usually CANCELLED).
  virtual absl::Status Decode(const WorkerRef& worker, const DecodeCall& call,
                              const CallOptions& options, const DecodeEventHandler& on_event) = 0;
};

}  // namespace baton::scheduler
