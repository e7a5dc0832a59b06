// The planner's discrete-event simulator: a deployment (prefill + decode instances, or colocated
// ones) serving a list of timed requests, each engine step priced by the StepLatencyModel. It runs
// the runtime's own policies rather than copies of them, so the planner and the runtime cannot
// drift apart:
//   - routing (scheduler/global/routing.h): PickPrefill, PickDecode, PickColocated over snapshots
//     of the simulated instances' loads, with the scheduler's own accounting (outstanding prefill
//     tokens, active requests, free KV blocks — read live, where the scheduler sees heartbeats);
//   - batching (runtime/engine/step_scheduler.h): every instance is a real StepScheduler over a real
//     BlockAllocator of the instance's KV capacity, so the prefill batching rule (prefill-first,
//     FCFS under the token budget and free blocks), continuous batching in decode, chunked prefill
//     in colocated instances and preemption on a full cache (swapped to the instance's swap
//     space when it has one, its copies priced by StepLatencyModel::KvSwapMs on every stage
//     before the step's micro-batches, as each rank runs them) are the engine's own;
//   - pipeline stages (runtime/engine/model_runner.h): a step is cut by PlanMicroBatches into the
//     micro-batches the runtime runs, and the stages work on them as a pipeline (micro-batch m
//     enters stage s when stage s finished what came before it and stage s - 1 finished m), with
//     up to pp steps in flight over disjoint sequences, started as Engine::Step starts them (when
//     the instance is idle or a step has just finished);
//   - migration: a request's first token leaves the prefill instance holding its KV; the decode
//     instance the router picked pulls it, first come first served, only when its allocator has
//     room for the prompt and the next token (Engine::CanAdmitPrefilled), one transfer at a time
//     per decode instance (its link), and the prefill instance frees the blocks when it is done.
// A step's time is the latency model's, times the coefficients' ServingSlowdown factor for its kind
// (with prompt tokens: prefill; else decode) and whether another instance is in a step as it starts.
//   - prefix caching (SimDeployment::prefix_caching): the instances' allocators are the runtime's
//     prefix caches, over the requests' token content (SimRequest::prompt_ids, else tokens unique
//     to the request), so a prompt whose prefix an instance computed before computes only the rest
//     and a decode instance pulls only the blocks it lacks (the transfer priced for those alone);
//     routing sees each instance's cached tokens for the prompt exactly (the scheduler's index is
//     a heartbeat late). Multi-turn sessions (SimRequest::session): a turn arrives think_s after
//     its session's previous turn finished, its prompt that turn's prompt, its answer and its own
//     message, as `baton bench --multi-turn` sends them.
// Not modelled: the scheduler's SLO admission (requests are never shed), network hops between the
// scheduler and workers, and the detokenizer. Deterministic: the same inputs give the same output.
#pragma once

#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/planner/step_latency_model.h"

namespace baton::scheduler::planner {

struct SimRequest {
  double arrival_s = 0;  // a later turn of a session: unused (it follows the previous turn)
  int input_len = 1;   // prompt tokens, >= 1 (a session's turn: with its history)
  int output_len = 1;  // generated tokens including the first, >= 1
  // The prompt's tokens (a session's turn: its new message alone), for prefix caching; empty:
  // tokens of the request's own, shared with no other.
  std::vector<int32_t> prompt_ids;
  // Multi-turn: turn `turn` of session `session` (-1: none); a session's turns follow each other
  // in the request list.
  int session = -1;
  int turn = 0;
  double think_s = 0;
};

// One phase's identical instances.
struct SimPhase {
  Parallelism parallelism;
  int num_instances = 1;
  int max_num_seqs = 256;
  int max_num_batched_tokens = 2048;  // prefill-first: raised to the longest prompt, as the engine does
  bool chunked_prefill = false;       // colocated only
  int64_t kv_capacity_tokens = 0;     // 0: StepLatencyModel::KvCapacityTokens(parallelism)
  int64_t swap_capacity_tokens = 0;   // host swap space in KV tokens; 0: preemption recomputes
  bool stages_cross_nodes = false;    // the instance's pipeline stages talk over the inter-node link
};

// What runs: a whole deployment, or one phase alone (the planner's per-phase search, as DistServe's
// Algorithm 1 does). kPrefillOnly: a request is done at its first token and its KV freed at once
// (no decode side to wait for). kDecodeOnly: a request arrives with its prompt's KV and first token
// ready, and is routed to a decode instance, which admits it as soon as it has room (no transfer).
enum class SimMode : uint8_t { kDisaggregated, kColocated, kPrefillOnly, kDecodeOnly };

struct SimDeployment {
  SimMode mode = SimMode::kDisaggregated;
  SimPhase prefill;          // kDisaggregated, kPrefillOnly
  SimPhase decode;           // kDisaggregated, kDecodeOnly
  SimPhase colocated_phase;  // kColocated
  bool kv_same_node = true;  // prefill -> decode transfers over the intra-node link
  int block_size = 16;
  bool prefix_caching = false;  // the runtime's default is on; off, the planner's older figures
  bool kv_aware_routing = true;  // routing sees the instances' cached prefixes (routing_policy)
};

struct RequestTiming {
  double arrival_s = 0;  // a session's later turn: when it was sent
  double ttft_s = 0;    // 0 in kDecodeOnly
  double tpot_s = 0;    // (last token - first token) / (output_len - 1); 0 for one token
  double finish_s = 0;  // absolute
};

struct SimResult {
  std::vector<RequestTiming> requests;  // in the input's order
  double end_s = 0;                     // when the last request finished
  int num_preemptions = 0;         // sequences computed again after losing their KV
  int64_t num_swapped_blocks = 0;  // KV blocks swapped out (each comes back in once, or is dropped)
  int num_steps = 0;
  int64_t num_prompt_tokens = 0;  // of the prefills (prefix caching: those queried)
  int64_t num_cached_tokens = 0;  // of them, taken from a prefix cache
};

struct SloTargets {
  double ttft_s = 0;  // > 0
  double tpot_s = 0;  // > 0
};

// InvalidArgument for a bad deployment (an instance count or limit < 1), an empty or unsorted
// request list, a request longer than an instance's KV capacity, or a model the latency model
// rejects for a phase's parallelism (StepLatencyModel::Check).
absl::StatusOr<SimResult> Simulate(const SimDeployment& deployment, const StepLatencyModel& model,
                                   std::span<const SimRequest> requests);

// The share of requests meeting both targets.
double Attainment(const SimResult& result, const SloTargets& slo);
// The same for one phase's own objective (TTFT or TPOT).
double TtftAttainment(const SimResult& result, double ttft_s);
double TpotAttainment(const SimResult& result, double tpot_s);

}  // namespace baton::scheduler::planner
