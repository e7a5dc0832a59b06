// The placement search: which (TP, PP) and how many instances each phase gets on a cluster, for a
// workload and its SLOs — DistServe's two placement algorithms (OSDI'24 §4), with colocated
// serving as the baseline, all scored by the simulator (simulator.h).
//
//   High node-affinity (DistServe's Algorithm 1; fast cross-node links): each phase's (TP, PP) is
//     chosen on its own — a prefill instance alone against the TTFT objective, a decode instance
//     alone against TPOT — by goodput per device; then the phases are replicated so that neither
//     starves the other (the instance counts that serve `rate`, or the most the cluster serves).
//     KV moves over the inter-node link when the cluster has more than one node.
//   Low node-affinity (Algorithm 2; slow cross-node links): prefill and decode instances share pp,
//     and each node holds the same stage of k_p prefill and k_d decode instances (k_p tp_p +
//     k_d tp_d <= devices per node), so every KV transfer stays on a node. A unit of pp nodes is
//     replicated.
//   Colocated: one instance kind serving both phases (the runtime's colocated worker, with and
//     without chunked prefill), replicated.
// Goodput of a configuration: the highest rate whose simulated attainment reaches the target,
// found by doubling then bisection (GoodputByBisection). The best few phase pairs (by the bound
// the phases alone give) are simulated whole — routing, KV transfer, backpressure — and ranked by
// that goodput per device; ties go to fewer devices, then to the lower (tp, pp), so the answer is
// deterministic.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/planner/simulator.h"
#include "scheduler/planner/step_latency_model.h"

namespace baton::scheduler::planner {

struct ClusterSpec {
  int num_nodes = 1;
  int devices_per_node = 1;
  int num_devices() const { return num_nodes * devices_per_node; }
};

enum class Affinity : uint8_t { kHigh, kLow };

struct PlanOptions {
  SloTargets slo;
  double attainment = 0.9;     // target share of requests meeting both SLOs, in (0, 1]
  std::optional<double> rate;  // requests/s to serve; unset: the most the cluster serves
  Affinity affinity = Affinity::kHigh;
  std::vector<int> tps = {1, 2, 4, 8};  // tensor-parallel degrees to try (within a node)
  int max_pp = 8;                       // pipeline stages to try, 1 .. max_pp
  int max_num_seqs = 256;               // per instance (the deployment config's)
  int max_num_batched_tokens = 2048;
  int block_size = 16;
  bool prefix_caching = false;     // the simulated instances cache prefixes (SimDeployment's)
  int64_t kv_capacity_tokens = 0;  // > 0: every instance holds this much KV (a fixed budget)
  // Host swap space per device, in KV tokens (SimPhase::swap_capacity_tokens); 0: recompute.
  int64_t swap_tokens_per_device = 0;
  double rel_tolerance = 0.03;     // bisection stops when (hi - lo) / lo is below it
  int num_verified = 4;            // phase pairs (or colocated configs) simulated whole
};

struct PhaseChoice {
  Parallelism parallelism;
  int num_instances = 0;
  double goodput_alone = 0;  // req/s one instance serves alone against its phase's SLO
  bool chunked_prefill = false;  // colocated
  int num_devices() const { return num_instances * parallelism.num_devices(); }
};

struct Placement {
  bool colocated = false;
  PhaseChoice prefill;  // disaggregated
  PhaseChoice decode;   // disaggregated
  PhaseChoice colocated_phase;
  bool kv_same_node = true;
  int num_units = 1;  // low affinity: copies of the node unit (per unit: instances / num_units)
  int num_devices = 0;
  double goodput = 0;             // req/s of the whole deployment, simulated
  double goodput_per_device = 0;
  double rate = 0;                  // the rate predicted_attainment is for: options.rate or goodput
  double predicted_attainment = 0;  // simulated share meeting both SLOs at `rate`
  // Past the goodput (at 1.25 x goodput), which objective fails first: "prefill" (TTFT),
  // "decode" (TPOT) or "both"; for colocated, the same by objective.
  std::string binding_phase;
  double ttft_attainment_past = 0;
  double tpot_attainment_past = 0;
};

struct PlanReport {
  std::vector<Placement> disaggregated;  // ranked, best first
  std::vector<Placement> colocated;      // ranked, best first
  std::vector<std::string> explanation;  // what was compared and why the winner wins
  int num_simulations = 0;
};

// The highest rate in [min_rate, max_rate] with attainment_at(rate) >= target (0 if even min_rate
// misses). Doubles from initial_rate to bracket, then bisects to rel_tolerance.
absl::StatusOr<double> GoodputByBisection(
    const std::function<absl::StatusOr<double>(double rate)>& attainment_at, double target,
    double initial_rate, double rel_tolerance, double min_rate = 1e-4, double max_rate = 1e6);

// The requests at `rate`: unit_rate_requests' arrival times (mean rate 1/s) divided by rate.
std::vector<SimRequest> AtRate(std::span<const SimRequest> unit_rate_requests, double rate);

// InvalidArgument for bad options or an empty workload; FailedPrecondition when no configuration
// fits the cluster (the model's weights do not fit, or no tp divides the heads).
absl::StatusOr<PlanReport> PlanPlacement(const StepLatencyModel& model, const ClusterSpec& cluster,
                                         std::span<const SimRequest> unit_rate_requests,
                                         const PlanOptions& options);

}  // namespace baton::scheduler::planner
