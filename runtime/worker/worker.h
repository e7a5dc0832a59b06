// Worker: one serving instance's request handling — prefill with a KV hand-off, decode of handed-off
// requests, colocated generation — on top of an EngineLoop. Transport-agnostic (no gRPC types): the
// RPC adapter (runtime/rpc/worker_service.h) converts and delegates.
//
// Every blocking call takes a deadline and an is_cancelled probe. It returns DeadlineExceeded at the
// deadline, or Cancelled within 20 ms (kPollInterval) of the probe turning true or of Cancel(), with
// the request's KV blocks and queue slot freed, a KV pull in progress included.
//
// Ranks: an instance runs tp x pp ranks (model_ranks.h), each with its own KV pool and the same block
// ids. A prefill worker serves every rank's pool (one shm segment and one KvServer per rank) and
// hands a request off as a KvHandoff (kv_handoff.h): the model's terms, not its ranks'. A decode
// worker plans one pull per rank of its own layout from it (PlanKvPulls) and runs them in parallel,
// so prefill and decode instances may shard the model differently.
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
#include "runtime/transfer/kv_grants.h"
#include "runtime/transfer/kv_handoff.h"
#include "runtime/transfer/kv_link.h"
#include "runtime/transfer/kv_transport.h"
#include "runtime/worker/kv_admission_queue.h"
#include "runtime/worker/request_registry.h"
#include "runtime/worker/worker_options.h"

namespace baton::runtime {

struct PrefillResult {
  TokenOutput first_token;    // finish_reason set if the first token already ends the request
  KvHandoff kv;               // where the decode worker pulls the KV from (if not finished)
  int64_t prefill_end_us = 0;
};

struct KvTransferReport {
  int64_t start_us = 0;  // the first rank's pull started
  int64_t end_us = 0;    // the last rank's pull ended
  int64_t num_bytes = 0; // KV the decode ranks pulled for the request: sum over ranks of the
                         // rank's block bytes x blocks pulled (each rank's own layers x KV heads)
  int num_cached_tokens = 0;  // KV tokens the instance's prefix cache held already: not pulled
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
  // Tokens generated already (a request resumed after its decode worker died); the prefill
  // computes prompt + these, and its token is the next one. Usually empty.
  std::vector<int32_t> generated_token_ids;
  GenerationParams params;
  absl::Duration kv_lease;  // how long the KV stays held for a pull before it is freed
  absl::Time deadline;      // required; a default (1970) deadline has passed
  std::function<bool()> is_cancelled = [] { return false; };
};

// One Decode call.
struct DecodeCall {
  std::string request_id;                    // the scheduler's id; unique among requests in flight
  std::vector<int32_t> prompt_token_ids;     // [num_prompt_tokens]
  // Tokens sampled so far: decode role, at least the prefill's (kv then holds all but the last);
  // colocated, usually none (a resumed request's tokens: they are prefilled with the prompt).
  std::vector<int32_t> generated_token_ids;
  GenerationParams params;
  std::optional<KvHandoff> kv;   // set: a handed-off request (decode role); unset: colocated
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
  std::vector<RankHoldings> ranks;      // [num_ranks] what each rank holds, by rank_idx
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
  // How this instance shards the model.
  const ParallelLayout& layout() const { return layout_; }
  // The whole model's KV shape (all layers, all KV heads) with this worker's block_size.
  const KvPoolShape& kv_model_shape() const { return kv_model_shape_; }
  // Prefill role: how decode workers reach each rank's KV pool, by rank_idx.
  const std::vector<KvSource>& kv_sources() const { return kv_sources_; }
  // What the engine's prefix cache hashes chain from (Engine::prefix_cache_salt); empty when
  // prefix caching is off.
  const std::string& prefix_cache_salt() const { return prefix_cache_salt_; }
  // The prefix cache's events for the scheduler's index (EngineLoop::TakeCacheEvents), and a
  // request that the next ones be a full snapshot (after a lost heartbeat or a new registration).
  BlockAllocator::CacheEvents TakeCacheEvents() { return loop_->TakeCacheEvents(); }
  void RequestCacheSnapshot() { loop_->RequestCacheSnapshot(); }

  // Prefill role: runs the prompt, returns the first token; the KV stays held for call.kv_lease.
  // FailedPrecondition on another role, Unavailable while draining, AlreadyExists for an id in
  // flight, the engine's InvalidArgument for an invalid request.
  absl::StatusOr<PrefillResult> Prefill(PrefillCall call);
  // Prefill role: the scheduler wants none of the request's KV: frees it if held, or cancels the
  // prefill that would hold it (as Cancel). NotFound if the request is not here (released, expired,
  // or never arrived).
  absl::Status Release(const std::string& request_id);

  // Decode role (call.kv set): waits in the KV admission queue for room (FIFO, see
  // kv_admission_queue.h), pulls the KV (but the blocks its prefix cache holds), emits the transfer
  // report, then decodes. Colocated, or decode role under conditional disaggregation (kv unset):
  // runs the whole request. Returns OK after emitting the finishing token; FailedPrecondition
  // for a role that does not take this kind of request, Unavailable while draining, AlreadyExists,
  // InvalidArgument (also for a hand-off PlanKvPulls refuses, before queueing), the lowest failing
  // decode rank's transport status for a failed pull ("decode rank r: " prefixed when there are
  // several; Aborted "KV pull from the prefill instance failed: ..." when that status is
  // Unavailable, i.e. the source died or cannot be reached, or PermissionDenied, i.e. the source
  // no longer holds the KV for this request (kv_grants.h), so that the puller is not blamed),
  // DeadlineExceeded "no KV room before the deadline" / Cancelled "cancelled while
  // waiting for KV room" while queued.
  absl::Status Decode(DecodeCall call);

  // Cancels the request wherever it is: its waiting Prefill/Decode call returns Cancelled within
  // 20 ms and frees what it holds; a prefill request holding KV for a pull (no call waits)
  // has its KV freed here. False if the id is not in flight.
  bool Cancel(const std::string& request_id);
  void Drain() { draining_ = true; }
  WorkerStatsSnapshot Stats() const;

 private:
  // Reads what the worker keeps of the engine (sizes, layout, holdings), then starts its loop.
  Worker(const WorkerOptions& options, std::unique_ptr<Engine> engine);

  // Cancels the sequence on the engine thread and forgets the request.
  void Abandon(const std::string& request_id);
  // Prefill role: frees the KV a request held for a hand-off, whose registry entry is gone:
  // ReleaseHeldKv on the engine thread, waiting for it.
  void FreeHeldKv(SeqId seq_id, const std::string& kv_grant);
  // Engine thread: revokes the grant (waiting out reads in flight), then releases the blocks.
  void ReleaseHeldKv(Engine& engine, SeqId seq_id, const std::string& kv_grant);
  // Waits for the next output of a request; Cancelled/DeadlineExceeded per the contract above.
  absl::StatusOr<TokenOutput> NextOutput(TokenChannel& channel, absl::Time deadline,
                                         const std::function<bool()>& is_cancelled);
  void ExpireLeases(Engine& engine);
  // Decode role, engine thread (a hook): admits what fits from the KV admission queue.
  void AdmitWaitingForKv(Engine& engine);
  // Decode role: queues a handed-off request for KV room (one Post) and waits for its admission.
  // Moves the tokens and params out of `call`. On error nothing is admitted (or it is freed).
  absl::StatusOr<KvAdmission> AwaitKvRoom(DecodeCall& call, const WorkerRequest& request);
  // Decode role: the handed-off part of Decode: plan, KV room, pull, transfer report, then (one
  // Call) subscribe `sink` and StartDecoding. On error the request is forgotten and its blocks freed.
  absl::Status StartHandedOff(DecodeCall& call, const WorkerRequest& request, const TokenSink& sink);
  // Decode role: runs every rank's pull (rank r's spec into pools[r], dst_blocks), in parallel, each
  // bounded by `deadline` and stopped (Cancelled) within kPollInterval of `is_cancelled` turning
  // true; OK, or the lowest failing rank's status once all have returned.
  absl::Status PullAllRanks(const std::vector<KvPullSpec>& specs, const std::vector<const KvPool*>& pools,
                            const std::vector<BlockId>& dst_blocks, absl::Time deadline,
                            const std::function<bool()>& is_cancelled);

  WorkerOptions options_;
  ModelConfig model_config_;
  int max_model_len_;
  int num_kv_blocks_;
  ParallelLayout layout_;
  std::string prefix_cache_salt_;
  KvPoolShape kv_model_shape_;
  std::vector<RankHoldings> rank_holdings_;  // fixed once loaded
  RequestRegistry requests_;
  std::atomic<bool> draining_ = false;
  std::atomic<int64_t> prefill_tokens_outstanding_ = 0;
  std::vector<KvSource> kv_sources_;                   // prefill role: [num_ranks]
  std::unique_ptr<KvLinkFactory> kv_link_factory_;  // prefill role on a device: its KvServers'
  KvGrants kv_grants_;  // prefill role: which blocks pulls may read; outlives kv_servers_
  std::vector<std::unique_ptr<class KvServer>> kv_servers_;  // prefill role: [num_ranks]
  std::unique_ptr<KvTransport> transport_;     // decode role: pulls from prefill workers
  KvAdmissionQueue kv_admissions_;             // decode role; engine thread only
  std::atomic<int> num_waiting_for_kv_ = 0;    // kv_admissions_.size(), for Stats()
  std::unique_ptr<StepTraceWriter> step_trace_;  // written by the engine thread, if asked for
  std::unique_ptr<EngineLoop> loop_;           // destroyed first: stops the engine thread
};

}  // namespace baton::runtime
