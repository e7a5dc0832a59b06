// Routing: which instance gets a request's prefill, which gets its decode, and why. Pure functions
// over a snapshot of the live instances' loads (WorkerRegistry::LiveInstances), so a table test or
// the planner's simulator can call them without a registry.
//
// The policies (DESIGN.md, "A request's path"):
//   - Prefill: the instance with the fewest outstanding prefill tokens (prompt tokens sent to it
//     whose first token is not back): prefill is compute-bound, its queue is measured in tokens.
//   - Decode: an instance whose last reported free KV blocks fit the request's KV (its prompt + the
//     first token), the one with the fewest active requests; when none has room, the live one with
//     the fewest active requests anyway: it pulls the KV only once it has room (pull-based
//     backpressure), and the prefill instance holds the blocks meanwhile.
//   - Colocated: the instance with the fewest active requests.
//   - Ties go to the lowest instance index, so a decision does not depend on the snapshot's order.
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
};

struct RoutingDecision {
  WorkerRef worker;
  std::string reason;  // one line for logs and tests: "fewest outstanding prefill tokens (120)"
};

// `instances`: the live instances of the phase's role (any order).
std::optional<RoutingDecision> PickPrefill(std::span<const InstanceSnapshot> instances);
// num_prompt_tokens: the KV the decode instance must take (the prompt; the first token is added).
std::optional<RoutingDecision> PickDecode(std::span<const InstanceSnapshot> instances,
                                          int num_prompt_tokens);
std::optional<RoutingDecision> PickColocated(std::span<const InstanceSnapshot> instances);

}  // namespace baton::scheduler
