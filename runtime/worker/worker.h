// Worker: one serving instance's request handling — prefill with a KV hand-off, decode of handed-off
// requests, colocated generation — on top of an EngineLoop. Transport-agnostic (no gRPC types): the
// RPC adapter (runtime/rpc/worker_service.h) converts and delegates.
//
// Every blocking call takes a deadline and an is_cancelled probe and returns within one engine step
// of either: DeadlineExceeded or Cancelled, with the request's KV and queue slot freed.
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

struct WorkerStatsSnapshot {
  EngineLoop::Stats engine;
  int64_t num_prefill_tokens_outstanding = 0;
  int num_requests_holding_kv = 0;
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

  // Prefill role: runs the prompt, returns the first token; the KV stays held for lease.
  absl::StatusOr<PrefillResult> Prefill(const std::string& request_id, std::vector<int32_t> prompt,
                                        GenerationParams params, absl::Duration lease,
                                        absl::Time deadline, const std::function<bool()>& is_cancelled);
  // Prefill role: frees a request's held KV. NotFound if it holds none (released or expired).
  absl::Status Release(const std::string& request_id);

  // Decode role (kv set): waits for room, pulls the KV, then decodes. Colocated (kv unset): runs the
  // whole request. emit() returns false when the receiver is gone (the request is then cancelled).
  absl::Status Decode(const std::string& request_id, std::vector<int32_t> prompt,
                      std::vector<int32_t> generated, GenerationParams params,
                      const std::optional<KvPullSpec>& kv, absl::Time deadline,
                      const std::function<bool()>& is_cancelled,
                      const std::function<bool(const DecodeEvent&)>& emit);

  // Frees the request wherever it is; its waiting call returns Cancelled. False if unknown.
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
  std::unique_ptr<EngineLoop> loop_;           // destroyed first: stops the engine thread
};

}  // namespace baton::runtime
