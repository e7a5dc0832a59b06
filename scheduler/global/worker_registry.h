// WorkerRegistry: the scheduler's view of its worker instances — who is registered and alive, and
// their load. Routing (routing.h) decides from the snapshot LiveInstances() gives; this class only
// keeps the facts.
//
// Pure logic, no RPC types. Workers register (a new incarnation replaces an older one of the same
// role and index) and heartbeat their KV usage. An instance not heard from within the liveness
// timeout is only suspected (Suspects): it stays in every snapshot while the caller probes it
// directly, since a busy machine delays heartbeats as much as a frozen process stops them; the
// probe's answer settles it (Vouch, or MarkDead). An instance reported unreachable by a failed call
// (MarkDead) is dead and is left out of every snapshot. Between heartbeats the scheduler keeps its
// own accounting of what it sent: AddPrefillLoad (prompt tokens whose first token is not back) and
// AddActive (requests decoding on an instance), each call paired with one that undoes it when the
// phase ends. Thread-safe.

#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/model/model_shard.h"
#include "scheduler/global/prefix_index.h"
#include "scheduler/global/routing.h"

namespace baton::scheduler {

struct WorkerLoad {
  int num_kv_blocks_total = 0;
  int num_kv_blocks_used = 0;
  int num_requests_waiting = 0;
  int num_requests_running = 0;
  int num_requests_holding_kv = 0;  // prefill: requests whose KV waits for a decode worker
  int num_requests_swapped = 0;     // preempted with their KV in the swap space
  int64_t prefix_cache_queries = 0;  // tokens since the worker started
  int64_t prefix_cache_hits = 0;
};

struct WorkerEntry {
  WorkerRole role = WorkerRole::kColocated;
  int instance_idx = 0;
  std::string incarnation_id;
  std::string address;  // host:port of its WorkerService
  int pid = 0;
  int block_size = 16;
  // What its prefix cache's block hashes chain from (prefix_index.h); empty: no prefix cache.
  std::string prefix_cache_salt;
  // How the instance shards the model over its ranks (as it registered); tp 1 x pp 1 for a worker
  // that did not say.
  runtime::ParallelLayout layout;
  WorkerLoad reported;  // from the last heartbeat
  absl::Time last_seen;
  bool alive = true;
  bool suspected = false;  // silent past the liveness timeout, being probed
  std::string death;    // why it is dead
  // The scheduler's own accounting of what it sent.
  int64_t outstanding_prefill_tokens = 0;
  int num_active_requests = 0;
};

// A live instance's load as the scheduler accounts it, for admission.
struct InstanceLoad {
  std::string name;                        // WorkerName(role, instance_idx)
  int64_t outstanding_prefill_tokens = 0;  // prompt tokens sent to it whose first token is not back
  int num_active_requests = 0;             // requests decoding (or queued to decode) on it
};

class WorkerRegistry {
 public:
  // expected: the instances the deployment should have, as {role, count}.
  WorkerRegistry(std::vector<std::pair<WorkerRole, int>> expected, absl::Duration liveness_timeout);

  void Register(WorkerEntry entry, absl::Time now);
  // False if the incarnation is unknown (the worker must register again).
  bool Heartbeat(const std::string& incarnation_id, const WorkerLoad& load, absl::Time now);
  // A call to the worker failed as if it were down.
  void MarkDead(const std::string& incarnation_id, const std::string& why);
  // The process `pid` of instance (role, instance_idx) exited (the launcher saw it): its live
  // incarnation, when it is that process, is dead. False when there is none.
  bool MarkExited(WorkerRole role, int instance_idx, int pid, const std::string& why);
  // Live workers silent for longer than the liveness timeout and not suspected yet: each is now
  // suspected (it stays alive) until a heartbeat, Vouch or MarkDead settles it.
  struct Suspect {
    WorkerRef worker;
    int pid = 0;
    std::string name;        // "prefill worker 0 (pid 123)"
    absl::Duration silence;  // since its last heartbeat
  };
  std::vector<Suspect> Suspects(absl::Time now);
  // A direct probe reached the worker: it is alive, only slow to heartbeat.
  void Vouch(const std::string& incarnation_id, absl::Time now);

  // A worker's prefix cache events (prefix_index.h); ignored for an unknown incarnation.
  void ApplyCacheEvents(const std::string& incarnation_id, const runtime::BlockAllocator::CacheEvents& events);

  // Every live instance of `role`, by instance index, for routing. With a prompt: each one's
  // num_cached_tokens, the prompt's leading tokens its prefix cache holds by the index.
  std::vector<InstanceSnapshot> LiveInstances(WorkerRole role, PromptHashes* prompt = nullptr) const;
  // PickPrefill over the live prefill instances, and num_prompt_tokens added to the pick's
  // outstanding prefill tokens under the same lock (AddPrefillLoad takes them off): requests routed
  // at the same moment see each other's prompts, rather than all picking the idle instance.
  std::optional<RoutingDecision> PickPrefillAndCharge(PromptHashes* prompt, int num_prompt_tokens);

  void AddPrefillLoad(const std::string& incarnation_id, int64_t num_tokens);
  void AddActive(const std::string& incarnation_id, int delta);

  // The load of the instance `worker` names; nullopt when it is dead or unknown.
  std::optional<InstanceLoad> LoadOf(const WorkerRef& worker) const;
  // Every live instance of `role`, by instance index.
  std::vector<InstanceLoad> LiveLoads(WorkerRole role) const;
  // num_active_requests of an incarnation; 0 when unknown.
  int NumActive(const std::string& incarnation_id) const;
  // The layout the instance `worker` names registered with; nullopt when it is unknown.
  std::optional<runtime::ParallelLayout> LayoutOf(const WorkerRef& worker) const;

  // Problems for Health: missing or dead instances. all_phases_served: every phase has a live one.
  struct Health {
    bool all_phases_served = false;
    bool all_expected_alive = false;
    std::vector<std::string> problems;
  };
  Health CheckHealth() const;
  std::vector<WorkerEntry> Snapshot() const;

 private:
  std::vector<InstanceSnapshot> SnapshotsLocked(WorkerRole role, PromptHashes* prompt) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const std::vector<std::pair<WorkerRole, int>> expected_;
  const absl::Duration liveness_timeout_;
  mutable absl::Mutex mu_;
  // By incarnation id; dead incarnations stay for Health until replaced.
  absl::flat_hash_map<std::string, WorkerEntry> workers_ ABSL_GUARDED_BY(mu_);
  PrefixIndex prefix_index_ ABSL_GUARDED_BY(mu_);  // live incarnations only
};

}  // namespace baton::scheduler
