// FakeWorkerClient: a scripted WorkerClient for tests of the request flow. No process, no socket:
// each call plays the script given for its instance and logs what happened, in order.
//
// It models what the gRPC client does around cancellation: a client that cancels while a Prefill or
// Decode call runs makes that call end with CANCELLED (the calls are children of the client's call)
// and client_cancelled() turns true; a Decode whose handler returns false ends with CANCELLED (the
// client TryCancel()s it).
//
// The log: "Prefill p0", "Decode d0", "Release p0", and for each Decode event delivered "kv" or
// "tokens". Not thread-safe (one request at a time).
#pragma once

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "scheduler/global/worker_client.h"

namespace baton::scheduler::testing {

struct PrefillScript {
  absl::StatusOr<PrefillResult> result = PrefillResult{};
  bool client_cancels_during = false;  // the call ends CANCELLED instead
  bool client_cancels_after = false;   // the call returns `result`, then the client cancels
};

struct DecodeScript {
  std::vector<DecodeEvent> events;
  absl::Status end_status;                       // after the last event
  std::optional<size_t> client_cancels_before;   // event index at which the client cancels
  std::function<void()> on_call;                 // runs first (e.g. a worker dies meanwhile)
  // After the events, the call polls CallOptions::abandon once, as the call watchdog does; when it
  // says abandon, the call ends UNAVAILABLE instead of end_status.
  bool polls_abandon = false;
};

class FakeWorkerClient final : public WorkerClient {
 public:
  // By incarnation id; an instance without a script fails the test's expectations loudly. An
  // instance given several scripts (Then*) plays them call by call, the last one from then on.
  void SetPrefill(const std::string& incarnation_id, PrefillScript script) {
    prefill_[incarnation_id] = {std::move(script)};
  }
  void SetDecode(const std::string& incarnation_id, DecodeScript script) {
    decode_[incarnation_id] = {std::move(script)};
  }
  void ThenPrefill(const std::string& incarnation_id, PrefillScript script) {
    prefill_[incarnation_id].push_back(std::move(script));
  }
  void ThenDecode(const std::string& incarnation_id, DecodeScript script) {
    decode_[incarnation_id].push_back(std::move(script));
  }

  absl::StatusOr<PrefillResult> Prefill(const WorkerRef& worker, const PrefillCall& call,
                                        const CallOptions&) override {
    log_.push_back(absl::StrCat("Prefill ", worker.incarnation_id));
    prefill_calls_.push_back(call);
    auto it = prefill_.find(worker.incarnation_id);
    if (it == prefill_.end()) return absl::InternalError("fake: no prefill script");
    const PrefillScript& script = Next(it->second, num_prefill_calls_[worker.incarnation_id]++);
    if (script.client_cancels_during) {
      client_cancelled_ = true;
      return absl::CancelledError("Cancelled");
    }
    if (script.client_cancels_after) client_cancelled_ = true;
    return script.result;
  }

  absl::Status Release(const WorkerRef& worker, const std::string& request_id,
                       const CallOptions&) override {
    log_.push_back(absl::StrCat("Release ", worker.incarnation_id));
    released_.push_back(request_id);
    return absl::OkStatus();
  }

  absl::Status Decode(const WorkerRef& worker, const DecodeCall& call, const CallOptions& options,
                      const DecodeEventHandler& on_event) override {
    log_.push_back(absl::StrCat("Decode ", worker.incarnation_id));
    decode_calls_.push_back(call);
    auto it = decode_.find(worker.incarnation_id);
    if (it == decode_.end()) return absl::InternalError("fake: no decode script");
    const DecodeScript& script = Next(it->second, num_decode_calls_[worker.incarnation_id]++);
    if (script.on_call) script.on_call();
    for (size_t i = 0; i < script.events.size(); ++i) {
      if (script.client_cancels_before == i) {
        client_cancelled_ = true;
        return absl::CancelledError("Cancelled");
      }
      const DecodeEvent& event = script.events[i];
      log_.push_back(std::holds_alternative<KvTransferred>(event) ? "kv" : "tokens");
      if (!on_event(event)) return absl::CancelledError("Cancelled");  // TryCancel()
    }
    if (script.client_cancels_before == script.events.size()) {
      client_cancelled_ = true;
      return absl::CancelledError("Cancelled");
    }
    if (script.polls_abandon && options.abandon && options.abandon()) {
      log_.push_back("abandoned");
      return absl::UnavailableError("abandoned: the call's worker was cut off");
    }
    return script.end_status;
  }

  bool client_cancelled() const { return client_cancelled_; }
  const std::vector<std::string>& log() const { return log_; }
  const std::vector<std::string>& released() const { return released_; }  // request ids
  const std::vector<PrefillCall>& prefill_calls() const { return prefill_calls_; }
  const std::vector<DecodeCall>& decode_calls() const { return decode_calls_; }

 private:
  template <typename Script>
  static const Script& Next(const std::vector<Script>& scripts, size_t call) {
    return scripts[std::min(call, scripts.size() - 1)];
  }

  absl::flat_hash_map<std::string, std::vector<PrefillScript>> prefill_;
  absl::flat_hash_map<std::string, std::vector<DecodeScript>> decode_;
  absl::flat_hash_map<std::string, size_t> num_prefill_calls_;
  absl::flat_hash_map<std::string, size_t> num_decode_calls_;
  bool client_cancelled_ = false;
  std::vector<std::string> log_;
  std::vector<std::string> released_;
  std::vector<PrefillCall> prefill_calls_;
  std::vector<DecodeCall> decode_calls_;
};

}  // namespace baton::scheduler::testing
