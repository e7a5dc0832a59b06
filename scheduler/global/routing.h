// Routing: which instance gets a request's prefill, which gets its decode, and why. Pure functions
// over a snapshot of the live instances' loads (WorkerRegistry::LiveInstances), so a table test or
// the planner's simulator can call them without a registry.
//
// The policies (DESIGN.md, "A request's path"), each weighing load against the prompt's leading
// tokens an instance's prefix cache holds (num_cached_tokens, from the scheduler's index of the
// workers' cache events, prefix_index.h; 0 for all without prefix caching):
//   - Prefill: the least prefill work: outstanding prefill tokens (prompt tokens sent to it whose
//     first token is not back) plus the prompt tokens it would still compute (Dynamo's KV router
//     cost: queued work + tokens to compute, the cached ones credited). Prefill is compute-bound,
//     its queue is measured in tokens, so a cached token is worth a queued one.
//   - Decode: an instance whose last reported free KV blocks fit the request's KV (its prompt + the
//     first token), the one with the fewest active requests, an instance counting one request
//     lighter for holding the whole prompt (in proportion for part of it: the blocks it need not
//     pull, or compute under conditional disaggregation); when none has room, the live one with
//     the fewest active requests anyway: it pulls the KV only once it has room (pull-based
//     backpressure), and the prefill instance holds the blocks meanwhile.
//   - Colocated: as Decode's load (fewest active requests, the same credit for a cached prompt),
//     room aside: the instance prefills and decodes, so its cache serves both.
//   - Ties go to the lowest instance index, so a decision does not depend on the snapshot's order.
// Every decision says why in one line, and by a label for metrics: prefix_cache (the pick holds
// part of the prompt and that moved the choice), least_loaded, or no_room.
// An empty snapshot picks nothing (nullopt): the caller answers UNAVAILABLE.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "runtime/worker/worker_role.h"

namespace baton::scheduler {

using runtime::WorkerName;
using runtime::WorkerRole;

// Enough to call an instance: what a routing decision hands back.
struct WorkerRef {
  std::string incarnation_id;
  std::string address;  // host:port of its WorkerService
  WorkerRole role = WorkerRole::kColocated;
  int instance_idx = 0;
};

// One live instance as routing sees it.
struct InstanceSnapshot {
  WorkerRef worker;
  int block_size = 16;                     // tokens per KV block
  int num_kv_blocks_free = 0;              // total - used, from its last heartbeat
  int64_t outstanding_prefill_tokens = 0;  // the scheduler's own accounting
  int num_active_requests = 0;             // requests decoding (or queued to decode) on it
  int num_cached_tokens = 0;               // of this request's prompt, by the scheduler's index
};

struct RoutingDecision {
  WorkerRef worker;
  // One line for logs and tests: "least prefill work: 120 outstanding + 80 to compute (1920 cached)".
  std::string reason;
  const char* label = "least_loaded";  // prefix_cache | least_loaded | no_room
};

// A decision as metrics keep it: the phase's role and the label.
struct RouteRecord {
  WorkerRole role = WorkerRole::kPrefill;
  const char* label = "least_loaded";
};

// `instances`: the live instances of the phase's role (any order). num_prompt_tokens: the tokens
// the instance computes (prefill, colocated) or takes the KV of (decode; the first token is added).
std::optional<RoutingDecision> PickPrefill(std::span<const InstanceSnapshot> instances,
                                           int num_prompt_tokens);
std::optional<RoutingDecision> PickDecode(std::span<const InstanceSnapshot> instances,
                                          int num_prompt_tokens);
std::optional<RoutingDecision> PickColocated(std::span<const InstanceSnapshot> instances,
                                             int num_prompt_tokens);

}  // namespace baton::scheduler
