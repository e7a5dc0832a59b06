#include "scheduler/planner/simulator.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <queue>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "runtime/batch/sequence.h"
#include "runtime/engine/model_runner.h"
#include "runtime/engine/step_scheduler.h"
#include "runtime/kv_cache/block_allocator.h"
#include "runtime/kv_cache/block_table.h"
#include "scheduler/global/routing.h"

namespace baton::scheduler::planner {
namespace {

using runtime::BlockAllocator;
using runtime::NumBlocksFor;
using runtime::ScheduledStep;
using runtime::Sequence;
using runtime::StepScheduler;

enum class EventKind : uint8_t { kArrival, kStepDone, kTransferDone };

struct Event {
  double time_s;
  int64_t order;  // FIFO among events at the same time: the run is deterministic
  EventKind kind;
  int target;  // the request (arrival), the instance (step, transfer)
  bool operator>(const Event& other) const {
    return time_s != other.time_s ? time_s > other.time_s : order > other.order;
  }
};

// One simulated worker instance: the engine's own scheduler and allocator, priced by the model.
struct Instance {
  Instance(WorkerRole role, int idx, const SimPhase& phase, int num_blocks, int num_swap_blocks,
           int max_context, bool prefix_caching)
      : role(role), idx(idx), phase(phase), allocator(num_blocks), swap_allocator(num_swap_blocks),
        scheduler(runtime::StepSchedulerConfig{
                      .max_num_seqs = phase.max_num_seqs,
                      // As the engine does without chunked prefill: any prompt fits one step.
                      .max_num_batched_tokens = phase.chunked_prefill
                                                    ? phase.max_num_batched_tokens
                                                    : std::max(phase.max_num_batched_tokens, max_context),
                      .chunked_prefill = phase.chunked_prefill,
                      .max_steps_in_flight = phase.parallelism.pp,
                      .prefix_caching = prefix_caching,
                      .prefix_cache_root = runtime::PrefixCacheRoot("baton plan")},
                  &allocator, num_swap_blocks > 0 ? &swap_allocator : nullptr),
        stage_free_s(phase.parallelism.pp, 0.0) {}

  WorkerRole role;
  int idx;
  const SimPhase& phase;
  BlockAllocator allocator;
  BlockAllocator swap_allocator;  // the instance's swap space; no blocks without one
  StepScheduler scheduler;
  std::deque<ScheduledStep> in_flight;  // oldest first, at most pp (Engine::Step)
  std::vector<double> stage_free_s;     // [pp] when each stage is done with what it was given
  bool finished_step = false;           // a step just finished: the engine starts new ones
  // The scheduler's accounting, as routing reads it.
  int64_t outstanding_prefill_tokens = 0;
  int num_active_requests = 0;
  // Decode role: requests routed here whose KV is still on their prefill instance, in order.
  std::deque<int> pulls;
  int pulling = -1;  // the request whose KV is moving now; -1: the link is idle
  int event_id = -1;  // its index in Simulation::instances_, which events name it by
  bool start_pending = false;  // in Simulation::to_start_
};

struct RequestState {
  double arrival_s = 0;                   // a session's later turn: when it was sent
  std::vector<int32_t> prompt;            // its tokens: SimRequest::prompt_ids, or made up (Prompt)
  std::unique_ptr<Sequence> prefill_seq;  // on the prefill (or colocated) instance
  std::unique_ptr<Sequence> decode_seq;   // on the decode instance
  int prefill_instance = -1;
  int decode_instance = -1;
  double first_token_s = 0;
};

class Simulation {
 public:
  Simulation(const SimDeployment& deployment, const StepLatencyModel& model,
             std::span<const SimRequest> requests)
      : deployment_(deployment), model_(model), requests_(requests), state_(requests.size()),
        result_{.requests = std::vector<RequestTiming>(requests.size())} {}

  absl::Status AddInstances(WorkerRole role, const SimPhase& phase, int64_t max_request_tokens) {
    const std::string name(runtime::WorkerRoleName(role));
    if (phase.num_instances < 1 || phase.max_num_seqs < 1 || phase.max_num_batched_tokens < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": instances, max_num_seqs and max_num_batched_tokens must be >= 1"));
    }
    if (absl::Status s = model_.Check(phase.parallelism); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": ", s.message()));
    }
    const int64_t capacity = phase.kv_capacity_tokens > 0
                                 ? phase.kv_capacity_tokens
                                 : model_.KvCapacityTokens(phase.parallelism);
    const int64_t num_blocks = std::min<int64_t>(capacity / deployment_.block_size, 1 << 30);
    if (num_blocks * deployment_.block_size < max_request_tokens) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": a request of ", max_request_tokens, " tokens does not fit the instance's KV (",
          num_blocks * deployment_.block_size, " tokens)"));
    }
    if (phase.swap_capacity_tokens < 0) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": swap capacity must be >= 0"));
    }
    const int64_t num_swap_blocks =
        std::min<int64_t>(phase.swap_capacity_tokens / deployment_.block_size, 1 << 30);
    std::vector<std::unique_ptr<Instance>>& pool = Pool(role);
    for (int i = 0; i < phase.num_instances; ++i) {
      pool.push_back(std::make_unique<Instance>(role, i, phase, static_cast<int>(num_blocks),
                                                static_cast<int>(num_swap_blocks),
                                                model_.model().max_context, deployment_.prefix_caching));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<SimResult> Run() {
    for (size_t r = 0; r < requests_.size(); ++r) {
      if (requests_[r].turn == 0) Push(requests_[r].arrival_s, EventKind::kArrival, static_cast<int>(r));
    }
    while (!events_.empty()) {
      const Event event = events_.top();
      events_.pop();
      now_s_ = event.time_s;
      switch (event.kind) {
        case EventKind::kArrival:
          Arrive(event.target);
          break;
        case EventKind::kStepDone:
          FinishStep(*instances_[event.target]);
          break;
        case EventKind::kTransferDone:
          FinishTransfer(*instances_[event.target]);
          break;
      }
      // An engine plans its next step from everything that reached it by then: steps start only
      // once every event of this instant is in.
      if (events_.empty() || events_.top().time_s > now_s_) StartSteps();
    }
    if (num_finished_ != static_cast<int64_t>(requests_.size())) {
      return absl::InternalError(absl::StrCat("the simulation stalled with ",
                                              requests_.size() - num_finished_, " requests unfinished"));
    }
    return std::move(result_);
  }

 private:
  std::vector<std::unique_ptr<Instance>>& Pool(WorkerRole role) {
    return role == WorkerRole::kDecode ? decode_ : front_;
  }
  bool colocated() const { return deployment_.mode == SimMode::kColocated; }

  void Push(double time_s, EventKind kind, int target) {
    events_.push(Event{time_s, next_order_++, kind, target});
  }

  // The pool as routing sees it; with prefix caching and KV-aware routing, each instance's cached
  // tokens of `prompt`.
  std::vector<InstanceSnapshot> Snapshots(const std::vector<std::unique_ptr<Instance>>& pool,
                                          const std::vector<int32_t>& prompt) const {
    std::vector<runtime::BlockHash> hashes;
    if (deployment_.prefix_caching && deployment_.kv_aware_routing) {
      runtime::ExtendBlockHashes(runtime::PrefixCacheRoot("baton plan"), prompt, deployment_.block_size, &hashes);
    }
    std::vector<InstanceSnapshot> out;
    out.reserve(pool.size());
    for (const auto& inst : pool) {
      out.push_back(InstanceSnapshot{
          .worker = WorkerRef{.role = inst->role, .instance_idx = inst->idx},
          .block_size = deployment_.block_size,
          .num_kv_blocks_free = inst->allocator.num_blocks_free(),
          .outstanding_prefill_tokens = inst->outstanding_prefill_tokens,
          .num_active_requests = inst->num_active_requests,
          .num_cached_tokens = static_cast<int>(inst->allocator.FindCached(hashes).size()) * deployment_.block_size});
    }
    return out;
  }

  // The request's prompt: its session's history (the previous turn's prompt and answer) and its
  // own tokens, which are SimRequest::prompt_ids or, without them, tokens of the request alone.
  std::vector<int32_t> Prompt(int r) const {
    const SimRequest& request = requests_[r];
    std::vector<int32_t> prompt;
    if (request.turn > 0 && request.session >= 0) {
      const RequestState& previous = state_[r - 1];
      prompt = previous.prompt;
      prompt.resize(prompt.size() + requests_[r - 1].output_len, 0);  // its answer: the sim samples 0s
    }
    const int own = request.input_len - static_cast<int>(prompt.size());
    if (!request.prompt_ids.empty()) {
      prompt.insert(prompt.end(), request.prompt_ids.begin(),
                    request.prompt_ids.begin() + std::min<size_t>(std::max(own, 0), request.prompt_ids.size()));
    }
    for (int i = static_cast<int>(prompt.size()); i < request.input_len; ++i) {
      prompt.push_back(static_cast<int32_t>((static_cast<uint64_t>(r) * 1000003u + i) % 2147483647u) + 1);
    }
    return prompt;
  }

  void Arrive(int r) {
    const SimRequest& request = requests_[r];
    RequestState& state = state_[r];
    state.arrival_s = now_s_;
    result_.requests[r].arrival_s = now_s_;
    state.prompt = Prompt(r);
    if (deployment_.mode == SimMode::kDecodeOnly) {
      state_[r].first_token_s = now_s_;
      HandOff(r);
      return;
    }
    const std::vector<InstanceSnapshot> snapshots = Snapshots(front_, state.prompt);
    const std::optional<RoutingDecision> decision =
        colocated() ? PickColocated(snapshots, request.input_len) : PickPrefill(snapshots, request.input_len);
    Instance& inst = *front_[decision->worker.instance_idx];
    runtime::GenerationParams params;
    params.max_tokens = request.output_len;
    params.ignore_eos = true;
    params.hold_kv_after_prefill = deployment_.mode == SimMode::kDisaggregated;
    state.prefill_seq = std::make_unique<Sequence>(r, state.prompt, std::move(params), deployment_.block_size);
    state.prefill_instance = inst.idx;
    inst.outstanding_prefill_tokens += request.input_len;
    if (colocated()) ++inst.num_active_requests;
    inst.scheduler.Add(state.prefill_seq.get());
    TryStart(inst);
  }

  // Marks the instance to plan a step once the current instant's events are all in.
  void TryStart(Instance& inst) {
    if (inst.start_pending) return;
    inst.start_pending = true;
    to_start_.push_back(&inst);
  }

  void StartSteps() {
    std::vector<Instance*> instances;
    instances.swap(to_start_);
    for (Instance* inst : instances) {
      inst->start_pending = false;
      Start(*inst);
    }
  }

  // Engine::Step: the engine waits for its oldest step whenever it has one in flight, so it starts
  // steps only when idle or right after one finished, and then as many as may be in flight.
  void Start(Instance& inst) {
    const bool may_start = inst.in_flight.empty() || inst.finished_step;
    inst.finished_step = false;
    if (!may_start) return;
    const Parallelism p = inst.phase.parallelism;
    while (static_cast<int>(inst.in_flight.size()) < p.pp) {
      ScheduledStep step = inst.scheduler.Schedule();
      if (step.empty()) return;  // all in steps, or waiting for blocks: a finish or hand-off frees them
      const bool has_prompt = step.seqs.size() > static_cast<size_t>(step.num_decode_seqs);
      const ServingSlowdown& served = model_.coefficients().serving_slowdown;
      const double slowdown =
          served.IsIdentity() ? 1.0 : served.Factor(has_prompt, AnotherInstanceBusy(inst));
      // Every stage first runs the step's swap copies, as soon as it is done with the steps before.
      const int64_t num_copied = static_cast<int64_t>(step.swap_out.size() + step.swap_in.size());
      const double swap_s = model_.KvSwapMs(num_copied * deployment_.block_size, p) / 1e3;
      for (int s = 0; swap_s > 0 && s < p.pp; ++s) {
        inst.stage_free_s[s] = std::max(inst.stage_free_s[s], now_s_) + swap_s;
      }
      result_.num_swapped_blocks += static_cast<int64_t>(step.swap_out.size());
      // Micro-batch m enters stage s once stage s is done with what came before it (this step's
      // m - 1, or an earlier step's last) and stage s - 1 handed m on.
      // When the step's last micro-batch leaves the last stage (a step of copies alone: when its
      // last stage is done with them).
      double done_s = std::max(now_s_, inst.stage_free_s[p.pp - 1]);
      for (const std::vector<runtime::StepPiece>& pieces :
           runtime::PlanMicroBatches(step.q_lens, p.pp, p.pp)) {
        MicroBatchShape shape;
        for (const runtime::StepPiece& piece : pieces) {
          const Sequence& seq = *step.seqs[piece.seq];
          if (piece.seq < step.num_decode_seqs) {
            ++shape.num_decode_seqs;
            shape.decode_context += seq.num_tokens();
          } else {
            const double q = piece.q_len;
            const double offset = seq.num_computed_tokens + piece.q_begin;
            shape.prompt_tokens += q;
            shape.prompt_tokens_squared += q * (q + 2 * offset);
          }
        }
        const double stage_s = slowdown * model_.StageMs(p, shape, inst.phase.stages_cross_nodes) / 1e3;
        double ready_s = now_s_;  // all of the step's micro-batches are there at once
        for (int s = 0; s < p.pp; ++s) {
          inst.stage_free_s[s] = std::max(inst.stage_free_s[s], ready_s) + stage_s;
          ready_s = inst.stage_free_s[s];
        }
        done_s = ready_s;
      }
      for (size_t i = step.num_decode_seqs; i < step.seqs.size(); ++i) {
        const Sequence& seq = *step.seqs[i];
        if (seq.num_computed_tokens == 0 && seq.num_generated_tokens() > 0) ++result_.num_preemptions;
      }
      ++result_.num_steps;
      inst.in_flight.push_back(std::move(step));
      Push(done_s, EventKind::kStepDone, InstanceId(inst));
    }
  }

  static int InstanceId(const Instance& inst) { return inst.event_id; }

  // ServingSlowdown's "shared": another instance is in a step as this one starts its own.
  bool AnotherInstanceBusy(const Instance& inst) const {
    return std::any_of(instances_.begin(), instances_.end(),
                       [&](const Instance* other) {
                         return other != &inst && !other->in_flight.empty();
                       });
  }

  void FinishStep(Instance& inst) {
    // Steps finish in the order they started: the last stage takes them in that order.
    const ScheduledStep step = std::move(inst.in_flight.front());
    inst.in_flight.pop_front();
    inst.scheduler.StepDone(step);
    inst.finished_step = true;
    // The model runner's bookkeeping: the new tokens' K/V is in the cache.
    for (size_t i = 0; i < step.seqs.size(); ++i) {
      step.seqs[i]->num_computed_tokens += step.q_lens[i];
      step.seqs[i]->block_table.AppendTokens(step.q_lens[i]);
    }
    inst.scheduler.CacheComputedBlocks(step);
    for (Sequence* seq : step.seqs) {
      if (seq->num_uncomputed_tokens() > 0) continue;  // a prompt chunk short of its end
      seq->token_ids.push_back(0);
      const int r = static_cast<int>(seq->id);
      const SimRequest& request = requests_[r];
      RequestState& state = state_[r];
      const bool first_token = seq->num_generated_tokens() == 1 && inst.role != WorkerRole::kDecode;
      if (first_token) {
        state.first_token_s = now_s_;
        result_.requests[r].ttft_s = now_s_ - state.arrival_s;
        result_.num_prompt_tokens += request.input_len;
        result_.num_cached_tokens += seq->num_cached_tokens;
        inst.outstanding_prefill_tokens -= request.input_len;
      }
      if (seq->num_generated_tokens() >= request.output_len ||
          deployment_.mode == SimMode::kPrefillOnly) {
        Finish(inst, r, seq);
      } else if (inst.role == WorkerRole::kPrefill) {
        inst.scheduler.Park(seq);
        HandOff(r);
      }
    }
    TryStart(inst);
  }

  void Finish(Instance& inst, int r, Sequence* seq) {
    const SimRequest& request = requests_[r];
    RequestState& state = state_[r];
    RequestTiming& timing = result_.requests[r];
    timing.finish_s = now_s_;
    timing.tpot_s = request.output_len > 1 && deployment_.mode != SimMode::kPrefillOnly
                        ? (now_s_ - state.first_token_s) / (request.output_len - 1)
                        : 0;
    result_.end_s = std::max(result_.end_s, now_s_);
    inst.scheduler.Remove(seq);
    if (inst.role != WorkerRole::kPrefill) --inst.num_active_requests;
    state.prefill_seq.reset();
    state.decode_seq.reset();
    if (request.session < 0) state.prompt = {};  // a later turn builds on a session's prompt
    ++num_finished_;
    if (inst.role == WorkerRole::kDecode) TryPull(inst);  // its blocks are free now
    // The session's next turn, once its user has read this answer.
    const size_t next = static_cast<size_t>(r) + 1;
    if (request.session >= 0 && next < requests_.size() && requests_[next].session == request.session &&
        requests_[next].turn == request.turn + 1) {
      Push(now_s_ + requests_[next].think_s, EventKind::kArrival, static_cast<int>(next));
    }
  }

  void HandOff(int r) {
    const std::vector<InstanceSnapshot> snapshots = Snapshots(decode_, state_[r].prompt);
    const std::optional<RoutingDecision> decision = PickDecode(snapshots, requests_[r].input_len);
    Instance& inst = *decode_[decision->worker.instance_idx];
    state_[r].decode_instance = inst.idx;
    ++inst.num_active_requests;
    inst.pulls.push_back(r);
    TryPull(inst);
  }

  // Engine::CanAdmitPrefilled and AdmitPrefilled, then the transfer over the instance's link.
  void TryPull(Instance& inst) {
    if (inst.pulling >= 0 || inst.pulls.empty()) return;
    const int r = inst.pulls.front();
    const SimRequest& request = requests_[r];
    // The cached leading blocks another sequence holds take no free block (as the engine counts).
    const int num_held = inst.scheduler.NumHeldCachedBlocks(state_[r].prompt, request.input_len,
                                                            deployment_.block_size);
    if (!inst.allocator.CanAllocate(NumBlocksFor(request.input_len + 1, deployment_.block_size) -
                                    num_held)) {
      return;
    }
    inst.pulls.pop_front();
    RequestState& state = state_[r];
    runtime::GenerationParams params;
    params.max_tokens = request.output_len;
    params.ignore_eos = true;
    state.decode_seq = std::make_unique<Sequence>(r, state.prompt, std::move(params), deployment_.block_size);
    Sequence& seq = *state.decode_seq;
    seq.token_ids.push_back(0);
    // Engine::AdmitPrefilled: the blocks its prefix cache holds, then the rest, which it pulls.
    const int num_cached = inst.scheduler.TakeCachedKv(&seq, request.input_len);
    seq.block_table.AddBlocks(
        *inst.allocator.Allocate(NumBlocksFor(request.input_len, deployment_.block_size) - num_cached));
    seq.block_table.AppendTokens(request.input_len - seq.block_table.num_tokens());
    seq.num_computed_tokens = request.input_len;
    seq.status = runtime::SeqStatus::kAwaitingKv;
    inst.pulling = r;
    const int num_pulled = request.input_len - num_cached * deployment_.block_size;
    const double transfer_ms =
        deployment_.mode == SimMode::kDecodeOnly || num_pulled == 0
            ? 0
            : model_.KvTransferMs(num_pulled, deployment_.prefill.parallelism,
                                  deployment_.decode.parallelism, deployment_.kv_same_node);
    Push(now_s_ + transfer_ms / 1e3, EventKind::kTransferDone, InstanceId(inst));
  }

  void FinishTransfer(Instance& inst) {
    const int r = inst.pulling;
    inst.pulling = -1;
    RequestState& state = state_[r];
    if (state.prefill_seq != nullptr) {
      Instance& prefill = *front_[state.prefill_instance];
      prefill.scheduler.Remove(state.prefill_seq.get());
      state.prefill_seq.reset();
      TryStart(prefill);
    }
    inst.scheduler.AddRunning(state.decode_seq.get());
    TryStart(inst);
    TryPull(inst);
  }

 public:
  void IndexInstances() {
    for (auto* pool : {&front_, &decode_}) {
      for (auto& inst : *pool) {
        inst->event_id = static_cast<int>(instances_.size());
        instances_.push_back(inst.get());
      }
    }
  }

 private:
  const SimDeployment& deployment_;
  const StepLatencyModel& model_;
  std::span<const SimRequest> requests_;
  std::vector<RequestState> state_;
  SimResult result_;
  std::vector<std::unique_ptr<Instance>> front_;   // prefill or colocated
  std::vector<std::unique_ptr<Instance>> decode_;
  std::vector<Instance*> instances_;  // every instance; events name them by index
  std::vector<Instance*> to_start_;   // instances to plan a step for at the end of this instant
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  int64_t next_order_ = 0;
  int64_t num_finished_ = 0;
  double now_s_ = 0;
};

}  // namespace

absl::StatusOr<SimResult> Simulate(const SimDeployment& deployment, const StepLatencyModel& model,
                                   std::span<const SimRequest> requests) {
  if (requests.empty()) return absl::InvalidArgumentError("no requests to simulate");
  if (deployment.block_size < 1) return absl::InvalidArgumentError("block_size must be >= 1");
  int64_t max_tokens = 0;
  double last_arrival_s = 0;
  for (size_t r = 0; r < requests.size(); ++r) {
    const SimRequest& request = requests[r];
    if (request.input_len < 1 || request.output_len < 1) {
      return absl::InvalidArgumentError(absl::StrCat("request ", r, ": lengths must be >= 1"));
    }
    if (request.turn > 0 && (r == 0 || request.session < 0 || requests[r - 1].session != request.session ||
                             requests[r - 1].turn != request.turn - 1)) {
      return absl::InvalidArgumentError(absl::StrCat("request ", r, ": turn ", request.turn,
                                                     " does not follow its session's previous turn"));
    }
    if (request.turn == 0) {  // later turns follow their sessions, not the list's order
      if (last_arrival_s > request.arrival_s) {
        return absl::InvalidArgumentError(absl::StrCat("request ", r, " arrives before an earlier request"));
      }
      last_arrival_s = request.arrival_s;
    }
    max_tokens = std::max<int64_t>(max_tokens, request.input_len + request.output_len);
  }
  Simulation sim(deployment, model, requests);
  const SimMode mode = deployment.mode;
  if (mode == SimMode::kColocated) {
    RETURN_IF_ERROR(sim.AddInstances(WorkerRole::kColocated, deployment.colocated_phase, max_tokens));
  }
  if (mode == SimMode::kDisaggregated || mode == SimMode::kPrefillOnly) {
    RETURN_IF_ERROR(sim.AddInstances(WorkerRole::kPrefill, deployment.prefill, max_tokens));
  }
  if (mode == SimMode::kDisaggregated || mode == SimMode::kDecodeOnly) {
    RETURN_IF_ERROR(sim.AddInstances(WorkerRole::kDecode, deployment.decode, max_tokens));
  }
  sim.IndexInstances();
  return sim.Run();
}

double TtftAttainment(const SimResult& result, double ttft_s) {
  if (result.requests.empty()) return 0;
  int64_t met = 0;
  for (const RequestTiming& t : result.requests) met += t.ttft_s <= ttft_s;
  return static_cast<double>(met) / result.requests.size();
}

double TpotAttainment(const SimResult& result, double tpot_s) {
  if (result.requests.empty()) return 0;
  int64_t met = 0;
  for (const RequestTiming& t : result.requests) met += t.tpot_s <= tpot_s;
  return static_cast<double>(met) / result.requests.size();
}

double Attainment(const SimResult& result, const SloTargets& slo) {
  if (result.requests.empty()) return 0;
  int64_t met = 0;
  for (const RequestTiming& t : result.requests) met += t.ttft_s <= slo.ttft_s && t.tpot_s <= slo.tpot_s;
  return static_cast<double>(met) / result.requests.size();
}

}  // namespace baton::scheduler::planner
