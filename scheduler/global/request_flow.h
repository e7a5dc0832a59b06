// RequestFlow: one admitted request's life on the workers, as an explicit state machine (DESIGN.md,
// "A request's path", steps 2-6), over a WorkerClient, the WorkerRegistry, routing.h and the
// LatencyModel. No RPC types: the gRPC client is one WorkerClient, a scripted fake another.
//
// States and transitions (disaggregated):
//   kPrefilling  route to a prefill instance (routing.h PickPrefill), Prefill, write the first token
//                -> kHandingOff; -> kFinished if the first token ends the request
//   kHandingOff  route to a decode instance (PickDecode), open Decode with the KV lease; the decode
//                instance pulls the KV when it has room -> kDecoding on KvTransferred, which
//                releases the prefill instance's KV
//   kDecoding    stream token chunks to the client -> kFinished on a finish reason or stop string
// Conditional disaggregation (max_local_prefill_tokens): kPrefilling first routes the decode; when
// that instance's prefix cache leaves the context short of the threshold, kDecoding at once on it
// (Decode without kv_source: it prefills), as colocated; a failure there goes back to kPrefilling.
// Colocated: kDecoding from the start, on PickColocated's instance (Decode without kv_source).
// From any state: -> kCancelled when the client leaves (status CANCELLED), -> kFailed otherwise
// (UNAVAILABLE when no live instance can take the request or one dies under it; a worker's own
// error as it returned it).
//
// Surviving a dead worker: a request is retried, however many workers fail under it, until either no
// live worker of the phase can take it (it waits worker_wait for one) or retry_deadline has passed
// since its first failure; it then ends UNAVAILABLE saying which, and naming the last failure. (A
// fixed number of attempts gave up on a long prompt whose prefill a worker killed every few seconds
// kept cutting short, while live workers were there to take it.)
//   - No live instance of the phase: the request waits up to worker_wait for one (a deployment
//     still starting, or a worker being restarted) rather than failing at once.
//   - The prefill instance is unreachable: kPrefilling again, on another instance.
//   - The decode instance is unreachable before it reported the KV pulled: the prefill instance
//     still holds the KV, so kHandingOff again, to another decode instance.
//   - The decode instance reports that its pull failed because the source did (ABORTED, see
//     runtime/worker/worker.h): the decode instance is healthy and is not blamed; the prompt is
//     prefilled again on a live instance (with the first token the client has: token replay, below)
//     and handed off again.
//   - The prefill instance is marked dead while the decode instance is still pulling from it (a
//     frozen source): the Decode call is abandoned, which stops the pull and frees the decode
//     instance's blocks; the decode instance is not blamed, and the prompt runs again as above.
//   - The decode instance (or colocated instance) dies after the KV moved, tokens streamed or not:
//     token replay (as Dynamo does). The prompt and every token the client has are prefilled on a
//     live instance, which samples the next token exactly as the dead one would have (draw n of the
//     request's seed samples generated token n, on any worker), and the stream goes on: no token
//     lost or sent twice.
//   - A worker that stops answering (frozen, or cut off) is abandoned as soon as the registry marks
//     it dead (CallOptions::abandon): the call ends UNAVAILABLE and the request moves as above.
//
// What each path guarantees:
//   - The prefill instance's KV is released exactly once, as soon as the decode instance reports it
//     pulled it, or when the request ends on any other path while the prefill instance holds it
//     (not when the prefill itself failed, was cancelled, or finished the request: the worker holds
//     nothing then).
//   - A worker whose call fails as unreachable (UNAVAILABLE without "draining") is marked dead in
//     the registry: it gets no new requests.
//   - The registry's accounting is restored on every path: outstanding prefill tokens while a
//     prefill runs (on the colocated instance until its first token), one active request on the
//     decode instance while its stream is open.
//   - The LatencyModel learns every prefill's timing and every gap between consecutive tokens of
//     the decode stream (with the decode instance's active requests as the batch size), but for a
//     client that reads slower than the tokens come (a write to it blocked for kClientPacedWrite):
//     its gaps are its own pace from then on.
//
// Lifecycle: construct per request, call Run once. Not thread-safe (one request, one thread); the
// objects in the params must outlive it.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/tokenizer/tokenizer.h"
#include "scheduler/global/generate_chunk.h"
#include "scheduler/global/generate_request.h"
#include "scheduler/global/latency_model.h"
#include "scheduler/global/response_stream.h"
#include "scheduler/global/routing.h"
#include "scheduler/global/worker_client.h"
#include "scheduler/global/worker_registry.h"

namespace baton::scheduler {

enum class FlowState { kPrefilling, kHandingOff, kDecoding, kFinished, kFailed, kCancelled };

const char* FlowStateName(FlowState state);

// Where the request's flow runs and how it reaches its client.
struct RequestFlowParams {
  const runtime::Tokenizer* tokenizer = nullptr;
  WorkerRegistry* registry = nullptr;
  LatencyModel* latency_model = nullptr;
  WorkerClient* workers = nullptr;
  bool disaggregated = true;               // false: colocated instances
  absl::Duration kv_lease = absl::Seconds(30);  // how long a prefill instance holds KV for decode
  // Prefill and Decode calls end by this long after they start (or by the front end's deadline).
  absl::Duration max_call_duration = absl::Minutes(30);
  absl::Duration release_deadline = absl::Seconds(2);  // for Release, which nothing waits on
  absl::Duration worker_wait = absl::Seconds(10);  // for a live instance of a phase
  // From a request's first worker failure, how long it goes on being retried.
  absl::Duration retry_deadline = absl::Seconds(60);
  // Disaggregated, conditional disaggregation: a request whose context the chosen decode instance's
  // prefix cache leaves at most this many tokens to compute is prefilled there, with no hand-off
  // (the prefill step delays that instance's decodes: the threshold bounds the TPOT cost). 0: every
  // request is prefilled by a prefill instance.
  int max_local_prefill_tokens = 0;
  // Whether routing weighs the instances' cached prefixes (routing.h); false: load alone, as if no
  // instance held any (least loaded: the contrast that shows what the cache index buys).
  bool kv_aware_routing = true;
  ChunkSink write;                     // false: the client is gone
  std::function<bool()> is_cancelled;  // true once the client cancelled or disconnected
};

class RequestFlow {
 public:
  RequestFlow(RequestFlowParams params, PreparedRequest prepared);
  RequestFlow(const RequestFlow&) = delete;  // its ResponseStream points into params_
  RequestFlow& operator=(const RequestFlow&) = delete;

  // Runs the request to its end: OK with the last chunk written (kFinished), CANCELLED
  // (kCancelled), or the failure (kFailed). Call once.
  absl::Status Run();

  FlowState state() const { return state_; }
  // Every state entered, in order (for tests and logs).
  const std::vector<FlowState>& trace() const { return trace_; }
  // Every routing decision, in order, and the conditional disaggregation's last: "local",
  // "remote", or nullptr when it was not asked (for metrics).
  const std::vector<RouteRecord>& routes() const { return routes_; }
  const char* prefill_path() const { return prefill_path_; }

 private:
  FlowState Prefill();
  FlowState StartDecode();
  // Handles one event of the decode stream; false stops the stream.
  bool OnDecodeEvent(const DecodeEvent& event);
  FlowState EndDecode(const absl::Status& stream_status);
  // A pick of a live instance of `role`, waiting up to worker_wait for one; nullopt when none came
  // (or the client left).
  // *num_cached_tokens (optional): the context's tokens the pick's prefix cache holds, by the index.
  std::optional<RoutingDecision> Route(WorkerRole role, int* num_cached_tokens = nullptr);
  // The end of a request no live instance of `role` could take.
  FlowState NoLiveWorker(WorkerRole role);
  // After a worker failure the request can survive: `retry` while retry_deadline has not passed
  // and the client is still there, else the end with `failure`.
  FlowState Retry(FlowState retry, absl::Status failure);

  void Enter(FlowState state);
  // Ends the request with `status`: kFinished when OK, kCancelled when CANCELLED, else kFailed.
  FlowState End(absl::Status status);
  // A failed call to `worker`: marks it dead when unreachable; the request's status.
  absl::Status WorkerFailed(const WorkerRef& worker, const absl::Status& status);
  void ReleasePrefillKv();
  void PrefillDone();  // colocated: the prompt no longer counts as outstanding prefill work
  // Options for a Prefill or Decode call to `worker`: the deadline, and abandoned once the registry
  // marks the worker dead.
  CallOptions CallTo(const WorkerRef& worker) const;
  // A disaggregated Decode call's options: CallTo(decoder), also abandoned while the KV is still
  // being pulled once the registry marks the prefill source dead (the pull can never finish;
  // cancelling the call frees the decode worker's blocks at once). Sets kv_source_lost_ then.
  CallOptions HandOffCallTo(const WorkerRef& decoder);
  int NumContextTokens() const;  // prompt + generated_

  RequestFlowParams params_;
  PreparedRequest prepared_;
  ResponseStream stream_;
  const int num_prompt_tokens_;
  FlowState state_;
  std::vector<FlowState> trace_;
  absl::Status status_;

  GenerateChunk pending_;  // timing that rides on the next chunk written
  std::optional<WorkerRef> prefill_;
  std::optional<PrefillResult> prefilled_;
  bool prefill_kv_held_ = false;  // the prefill instance holds KV that we must release
  std::vector<int32_t> generated_;  // every token the client has, in order
  static constexpr absl::Duration kClientPacedWrite = absl::Milliseconds(50);
  bool client_paced_ = false;           // a write to the client blocked: learn no decode steps
  int num_failures_ = 0;                // worker failures survived so far
  absl::Time first_failure_;            // when the first of them happened
  std::string last_failure_;            // the latest of them, for the final error
  std::optional<WorkerRef> decoder_;
  std::optional<RoutingDecision> local_decode_;  // Prefill chose to prefill on this decode instance
  std::vector<RouteRecord> routes_;
  const char* prefill_path_ = nullptr;
  std::string decoder_name_;
  bool colocated_prefill_outstanding_ = false;
  int colocated_prefill_tokens_ = 0;  // what the colocated instance prefills: NumContextTokens()
  bool decode_resumed_ = false;       // the colocated Decode call resumes a request (token replay)
  int64_t last_emit_us_ = 0;  // the decode stream's previous emission; 0 before the first
  bool client_gone_ = false;
  // The hand-off in flight, as the call watchdog's thread sees it (HandOffCallTo).
  std::atomic<bool> kv_pulled_ = false;       // the decode worker reported the KV transferred
  std::atomic<bool> kv_source_lost_ = false;  // the source died before that: the call was abandoned
};

}  // namespace baton::scheduler
