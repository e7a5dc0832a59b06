// Worker: one serving instance's request handling — prefill with a KV hand-off, decode of handed-off
// requests, colocated generation — on top of an EngineLoop. Transport-agnostic (no gRPC types): the
// RPC adapter (runtime/rpc/worker_service.h) converts and delegates.
//
// Every blocking call takes a deadline and an is_cancelled probe. It returns DeadlineExceeded at the
// deadline, or Cancelled within 20 ms (kPollInterval) of the probe turning true or of Cancel(), with
// the request's KV blocks and queue slot freed. A KV pull in progress is bounded by the deadline
// only.
// Thread-safe: calls come from RPC handler threads; the engine is touched only on its own thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/engine/engine_loop.h"
#include "runtime/transfer/kv_transport.h"
#include "runtime/worker/kv_admission_queue.h"
#include "runtime/worker/request_registry.h"
#include "runtime/worker/worker_options.h"

namespace baton::runtime {

struct PrefillResult {
  TokenOutput first_token;    // finish_reason set if the first token already ends the request
  KvPullSpec kv;              // where the decode worker pulls the KV from (if not finished)
  int64_t prefill_end_us = 0;
};

struct KvTransferReport {
  int64_t start_us = 0;
  int64_t end_us = 0;
  int64_t num_bytes = 0;
};

// What a decode streams back: first (decode role) the KV transfer report, then token outputs.
struct DecodeEvent {
  std::optional<KvTransferReport> kv_transferred;
  std::optional<TokenOutput> token;
};

// One Prefill call.
struct PrefillCall {
  std::string request_id;                 // the scheduler's id; unique among requests in flight
  std::vector<int32_t> prompt_token_ids;  // [num_prompt_tokens]
  GenerationParams params;
  absl::Duration kv_lease;  // how long the KV stays held for a pull before it is freed
  absl::Time deadline;      // required; a default (1970) deadline has passed
  std::function<bool()> is_cancelled = [] { return false; };
};

// One Decode call.
struct DecodeCall {
  std::string request_id;                    // the scheduler's id; unique among requests in flight
  std::vector<int32_t> prompt_token_ids;     // [num_prompt_tokens]
  std::vector<int32_t> generated_token_ids;  // decode role: the tokens the prefill sampled (>= 1)
  GenerationParams params;
  std::optional<KvPullSpec> kv;  // set: a handed-off request (decode role); unset: colocated
  absl::Time deadline;           // required; a default (1970) deadline has passed
  std::function<bool()> is_cancelled = [] { return false; };
  // Receives the call's events in order; returns false when the receiver is gone (the request is
  // then cancelled). Called on the calling thread. Required.
  std::function<bool(const DecodeEvent&)> emit;
};

struct WorkerStatsSnapshot {
  EngineLoop::Stats engine;
  int64_t num_prefill_tokens_outstanding = 0;
  int num_requests_holding_kv = 0;
  int num_requests_waiting_for_kv = 0;  // decode role: queued for KV room, as of the engine loop's last turn
};

class Worker {
 public:
  // Loads the model and starts the engine thread (and, prefill role, the KV server).
  static absl::StatusOr<std::unique_ptr<Worker>> Create(const WorkerOptions& options);
  ~Worker();

  const WorkerOptions& options() const { return options_; }
  const ModelConfig& model_config() const { return model_config_; }
  int max_model_len() const { return max_model_len_; }
  int num_kv_blocks() const { return num_kv_blocks_; }
  // Prefill role: how decode workers reach this worker's KV pool.
  const KvSource& kv_source() const { return kv_source_; }

  // Prefill role: runs the prompt, returns the first token; the KV stays held for call.kv_lease.
  // FailedPrecondition on another role, Unavailable while draining, AlreadyExists for an id in
  // flight, the engine's InvalidArgument for an invalid request.
  absl::StatusOr<PrefillResult> Prefill(PrefillCall call);
  // Prefill role: frees a request's held KV. NotFound if it holds none (released or expired).
  absl::Status Release(const std::string& request_id);

  // Decode role (call.kv set): waits in the KV admission queue for room (FIFO, see
  // kv_admission_queue.h), pulls the KV, emits the transfer report, then decodes. Colocated (kv
  // unset): runs the whole request. Returns OK after emitting the finishing token; FailedPrecondition
  // for a role that does not take this kind of request, Unavailable while draining, AlreadyExists,
  // InvalidArgument, the transport's status for a failed pull, DeadlineExceeded "no KV room before
  // the deadline" / Cancelled "cancelled while waiting for KV room" while queued.
  absl::Status Decode(DecodeCall call);

  // Cancels the request wherever it is: its waiting Prefill/Decode call returns Cancelled within
  // 20 ms and frees what it holds; a prefill request holding KV for a pull (no call waits)
  // has its KV freed here. False if the id is not in flight.
  bool Cancel(const std::string& request_id);
  void Drain() { draining_ = true; }
  WorkerStatsSnapshot Stats() const;

 private:
  Worker(const WorkerOptions& options, std::unique_ptr<EngineLoop> loop, ModelConfig model_config,
         int max_model_len, int num_kv_blocks);

  // Cancels the sequence on the engine thread and forgets the request.
  void Abandon(const std::string& request_id);
  // Waits for the next output of a request; Cancelled/DeadlineExceeded per the contract above.
  absl::StatusOr<TokenOutput> NextOutput(TokenChannel& channel, absl::Time deadline,
                                         const std::function<bool()>& is_cancelled);
  void ExpireLeases(Engine& engine);
  // Decode role, engine thread (a hook): admits what fits from the KV admission queue.
  void AdmitWaitingForKv(Engine& engine);
  // Decode role: queues a handed-off request for KV room (one Post) and waits for its admission.
  // Moves the tokens and params out of `call`. On error nothing is admitted (or it is freed).
  absl::StatusOr<KvAdmission> AwaitKvRoom(DecodeCall& call, const WorkerRequest& request);
  // Decode role: the handed-off part of Decode: KV room, pull, transfer report, then (one Call)
  // subscribe `sink` and StartDecoding. On error the request is forgotten and its blocks freed.
  absl::Status StartHandedOff(DecodeCall& call, const WorkerRequest& request, const TokenSink& sink);

  WorkerOptions options_;
  ModelConfig model_config_;
  int max_model_len_;
  int num_kv_blocks_;
  RequestRegistry requests_;
  std::atomic<bool> draining_ = false;
  std::atomic<int64_t> prefill_tokens_outstanding_ = 0;
  KvSource kv_source_;
  std::unique_ptr<class KvServer> kv_server_;  // prefill role
  std::unique_ptr<KvTransport> transport_;     // decode role: pulls from prefill workers
  KvAdmissionQueue kv_admissions_;             // decode role; engine thread only
  std::atomic<int> num_waiting_for_kv_ = 0;    // kv_admissions_.size(), for Stats()
  std::unique_ptr<EngineLoop> loop_;           // destroyed first: stops the engine thread
};

}  // namespace baton::runtime
