#include "scheduler/planner/placement_search.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/common/status_macros.h"

namespace baton::scheduler::planner {
namespace {

// Past the goodput, where the binding objective is read.
constexpr double kPastGoodput = 1.25;

std::string Describe(Parallelism p) { return absl::StrCat("tp ", p.tp, " pp ", p.pp); }

// Lower is better: more goodput per device, then fewer devices, then the lower (tp, pp).
auto RankKey(const Placement& p) {
  const Parallelism a = p.colocated ? p.colocated_phase.parallelism : p.prefill.parallelism;
  const Parallelism b = p.colocated ? Parallelism{} : p.decode.parallelism;
  return std::make_tuple(-p.goodput_per_device, p.num_devices, a.tp, a.pp, b.tp, b.pp);
}

struct PhaseGoodput {
  Parallelism parallelism;
  double goodput = 0;  // one instance alone
  double per_device() const { return goodput / parallelism.num_devices(); }
};

class Search {
 public:
  Search(const StepLatencyModel& model, const ClusterSpec& cluster,
         std::span<const SimRequest> unit_rate_requests, const PlanOptions& options)
      : model_(model), cluster_(cluster), unit_(unit_rate_requests), options_(options) {
    double mean_input = 0;
    for (const SimRequest& r : unit_) mean_input += r.input_len;
    mean_input_ = mean_input / unit_.size();
  }

  int num_simulations() const { return num_simulations_; }

  // Every (tp, pp) the options allow that fits within `max_devices` and the model accepts; TP
  // stays within a node.
  std::vector<Parallelism> Candidates(int max_devices, int max_pp) const {
    std::vector<Parallelism> out;
    for (int tp : options_.tps) {
      if (tp > cluster_.devices_per_node) continue;
      for (int pp = 1; pp <= max_pp; ++pp) {
        const Parallelism p{tp, pp};
        if (p.num_devices() <= max_devices && model_.Check(p).ok()) out.push_back(p);
      }
    }
    return out;
  }

  SimPhase Phase(Parallelism p, int num_instances, bool stages_cross_nodes, bool chunked = false) const {
    return SimPhase{.parallelism = p,
                    .num_instances = num_instances,
                    .max_num_seqs = options_.max_num_seqs,
                    .max_num_batched_tokens = options_.max_num_batched_tokens,
                    .chunked_prefill = chunked,
                    .kv_capacity_tokens = options_.kv_capacity_tokens,
                    .swap_capacity_tokens = options_.swap_tokens_per_device * p.num_devices(),
                    .stages_cross_nodes = stages_cross_nodes};
  }

  absl::StatusOr<SimResult> Run(const SimDeployment& deployment, double rate) {
    ++num_simulations_;
    const std::vector<SimRequest> requests = AtRate(unit_, rate);
    return Simulate(deployment, model_, requests);
  }

  // Goodput of `deployment` against `attainment` (a function of the result).
  absl::StatusOr<double> Goodput(const SimDeployment& deployment,
                                 const std::function<double(const SimResult&)>& attainment,
                                 double initial_rate) {
    return GoodputByBisection(
        [&](double rate) -> absl::StatusOr<double> {
          ASSIGN_OR_RETURN(SimResult result, Run(deployment, rate));
          return attainment(result);
        },
        options_.attainment, std::max(initial_rate, 1e-3), options_.rel_tolerance);
  }

  // A first guess at an instance's rate: one mean prompt per prefill step.
  double InitialRate(Parallelism p) const {
    const MicroBatchShape one{.prompt_tokens = mean_input_,
                              .prompt_tokens_squared = mean_input_ * mean_input_};
    const double ms = model_.StageMs(p, one, false) * p.pp;
    return ms > 0 ? 1e3 / ms : 1.0;
  }

  absl::StatusOr<double> PrefillAlone(Parallelism p, bool stages_cross_nodes) {
    auto key = std::make_tuple(p.tp, p.pp, stages_cross_nodes);
    if (auto it = prefill_alone_.find(key); it != prefill_alone_.end()) return it->second;
    const double ttft = options_.slo.ttft_s;
    ASSIGN_OR_RETURN(double g, Goodput({.mode = SimMode::kPrefillOnly, .prefill = Phase(p, 1, stages_cross_nodes)},
                                       [&](const SimResult& r) { return TtftAttainment(r, ttft); },
                                       InitialRate(p)));
    return prefill_alone_[key] = g;
  }

  absl::StatusOr<double> DecodeAlone(Parallelism p, bool stages_cross_nodes) {
    auto key = std::make_tuple(p.tp, p.pp, stages_cross_nodes);
    if (auto it = decode_alone_.find(key); it != decode_alone_.end()) return it->second;
    const double tpot = options_.slo.tpot_s;
    ASSIGN_OR_RETURN(double g, Goodput({.mode = SimMode::kDecodeOnly, .decode = Phase(p, 1, stages_cross_nodes)},
                                       [&](const SimResult& r) { return TpotAttainment(r, tpot); },
                                       InitialRate(p)));
    return decode_alone_[key] = g;
  }

  // Simulates a whole deployment: its goodput, attainment at the rate, and the binding phase.
  // `replicas` copies of `unit` serve the load independently (low affinity); 1 otherwise.
  absl::Status Score(const SimDeployment& unit, int replicas, double initial_rate, Placement& out) {
    const SloTargets slo = options_.slo;
    auto both = [slo](const SimResult& r) { return Attainment(r, slo); };
    ASSIGN_OR_RETURN(const double unit_goodput, Goodput(unit, both, initial_rate));
    out.goodput = unit_goodput * replicas;
    out.goodput_per_device = out.num_devices > 0 ? out.goodput / out.num_devices : 0;
    out.rate = options_.rate.value_or(out.goodput);
    if (out.rate > 0) {
      ASSIGN_OR_RETURN(SimResult at_rate, Run(unit, out.rate / replicas));
      out.predicted_attainment = Attainment(at_rate, slo);
    }
    if (unit_goodput > 0) {
      ASSIGN_OR_RETURN(SimResult past, Run(unit, unit_goodput * kPastGoodput));
      out.ttft_attainment_past = TtftAttainment(past, slo.ttft_s);
      out.tpot_attainment_past = TpotAttainment(past, slo.tpot_s);
      const double gap = out.ttft_attainment_past - out.tpot_attainment_past;
      out.binding_phase = std::abs(gap) < 0.01 ? "both" : gap < 0 ? "prefill" : "decode";
    } else {
      out.binding_phase = "both";
    }
    return absl::OkStatus();
  }

  // Instance counts for per-instance goodputs gp and gd: those that serve options.rate, or the
  // most the devices serve (fewest devices among equals). {0, 0} when nothing fits.
  std::pair<int, int> Counts(double gp, int dp, double gd, int dd, int devices) const {
    if (gp <= 0 || gd <= 0) return {0, 0};
    if (options_.rate.has_value()) {
      const int np = static_cast<int>(std::ceil(*options_.rate / gp - 1e-9));
      const int nd = static_cast<int>(std::ceil(*options_.rate / gd - 1e-9));
      if (np * dp + nd * dd > devices) return {0, 0};
      return {std::max(np, 1), std::max(nd, 1)};
    }
    std::pair<int, int> best{0, 0};
    double best_value = 0;
    int best_devices = 0;
    for (int np = 1; np * dp + dd <= devices; ++np) {
      const int nd_max = (devices - np * dp) / dd;
      const double value = std::min(np * gp, nd_max * gd);
      // Drop the instances the other phase cannot feed.
      const int np_used = std::min(np, static_cast<int>(std::ceil(value / gp - 1e-9)));
      const int nd_used = std::min(nd_max, static_cast<int>(std::ceil(value / gd - 1e-9)));
      const int used = np_used * dp + nd_used * dd;
      if (value > best_value * (1 + 1e-9) || (std::abs(value - best_value) <= 1e-9 * value && used < best_devices)) {
        best = {np_used, nd_used};
        best_value = value;
        best_devices = used;
      }
    }
    return best;
  }

  absl::StatusOr<std::vector<Placement>> HighAffinity(std::vector<std::string>& explanation) {
    const std::vector<Parallelism> candidates = Candidates(cluster_.num_devices(), options_.max_pp);
    std::vector<PhaseGoodput> prefill, decode;
    for (Parallelism p : candidates) {
      const bool cross = p.num_devices() > cluster_.devices_per_node;
      ASSIGN_OR_RETURN(double gp, PrefillAlone(p, cross));
      ASSIGN_OR_RETURN(double gd, DecodeAlone(p, cross));
      if (gp > 0) prefill.push_back({p, gp});
      if (gd > 0) decode.push_back({p, gd});
    }
    auto by_per_device = [](const PhaseGoodput& a, const PhaseGoodput& b) {
      return std::make_tuple(-a.per_device(), a.parallelism.num_devices(), a.parallelism.tp) <
             std::make_tuple(-b.per_device(), b.parallelism.num_devices(), b.parallelism.tp);
    };
    std::sort(prefill.begin(), prefill.end(), by_per_device);
    std::sort(decode.begin(), decode.end(), by_per_device);
    explanation.push_back(PhaseLine("prefill alone (TTFT)", prefill));
    explanation.push_back(PhaseLine("decode alone (TPOT)", decode));
    const bool same_node = cluster_.num_nodes == 1;
    struct Pair {
      PhaseGoodput p, d;
      std::pair<int, int> counts;
      double bound_per_device;
    };
    // Every pair of the phases' configurations, not only each phase's best per device: the best
    // per device may be too large to share the cluster with the other phase (a decode instance of
    // pp 8 on 8 devices leaves no device to prefill on), and pairing costs no simulation.
    std::vector<Pair> pairs;
    const size_t top = static_cast<size_t>(std::max(1, options_.num_verified));
    for (size_t i = 0; i < prefill.size(); ++i) {
      for (size_t j = 0; j < decode.size(); ++j) {
        const int dp = prefill[i].parallelism.num_devices(), dd = decode[j].parallelism.num_devices();
        const auto counts = Counts(prefill[i].goodput, dp, decode[j].goodput, dd, cluster_.num_devices());
        if (counts.first == 0) continue;
        const double bound = std::min(counts.first * prefill[i].goodput, counts.second * decode[j].goodput);
        pairs.push_back({prefill[i], decode[j], counts, bound / (counts.first * dp + counts.second * dd)});
      }
    }
    std::stable_sort(pairs.begin(), pairs.end(),
                     [](const Pair& a, const Pair& b) { return a.bound_per_device > b.bound_per_device; });
    if (pairs.size() > top) pairs.resize(top);
    std::vector<Placement> out;
    for (const Pair& pair : pairs) {
      Placement placement;
      placement.prefill = {pair.p.parallelism, pair.counts.first, pair.p.goodput};
      placement.decode = {pair.d.parallelism, pair.counts.second, pair.d.goodput};
      placement.kv_same_node = same_node;
      placement.num_devices = placement.prefill.num_devices() + placement.decode.num_devices();
      const SimDeployment deployment{
          .mode = SimMode::kDisaggregated,
          .prefill = Phase(pair.p.parallelism, pair.counts.first,
                           pair.p.parallelism.num_devices() > cluster_.devices_per_node),
          .decode = Phase(pair.d.parallelism, pair.counts.second,
                          pair.d.parallelism.num_devices() > cluster_.devices_per_node),
          .kv_same_node = same_node,
          .block_size = options_.block_size,
          .prefix_caching = options_.prefix_caching};
      RETURN_IF_ERROR(Score(deployment, 1, pair.bound_per_device * placement.num_devices, placement));
      out.push_back(placement);
    }
    return out;
  }

  absl::StatusOr<std::vector<Placement>> LowAffinity(std::vector<std::string>& explanation) {
    struct Unit {
      int pp, tp_p, tp_d, k_p, k_d;
      double gp, gd, bound_per_device;
    };
    std::vector<Unit> units;
    for (int pp = 1; pp <= std::min(options_.max_pp, cluster_.num_nodes); ++pp) {
      const bool cross = pp > 1;  // each stage on its own node
      for (Parallelism p : Candidates(cluster_.devices_per_node * pp, pp)) {
        if (p.pp != pp) continue;
        for (Parallelism d : Candidates(cluster_.devices_per_node * pp, pp)) {
          if (d.pp != pp) continue;
          ASSIGN_OR_RETURN(double gp, PrefillAlone(p, cross));
          ASSIGN_OR_RETURN(double gd, DecodeAlone(d, cross));
          if (gp <= 0 || gd <= 0) continue;
          for (int k_p = 1; k_p * p.tp + d.tp <= cluster_.devices_per_node; ++k_p) {
            for (int k_d = 1; k_p * p.tp + k_d * d.tp <= cluster_.devices_per_node; ++k_d) {
              const int devices = pp * (k_p * p.tp + k_d * d.tp);
              units.push_back({pp, p.tp, d.tp, k_p, k_d, gp, gd, std::min(k_p * gp, k_d * gd) / devices});
            }
          }
        }
      }
    }
    std::stable_sort(units.begin(), units.end(),
                     [](const Unit& a, const Unit& b) { return a.bound_per_device > b.bound_per_device; });
    const size_t top = static_cast<size_t>(std::max(1, options_.num_verified));
    if (units.size() > top) units.resize(top);
    std::vector<Placement> out;
    for (const Unit& u : units) {
      const int unit_devices = u.pp * (u.k_p * u.tp_p + u.k_d * u.tp_d);
      const double unit_bound = u.bound_per_device * unit_devices;
      const int max_replicas = cluster_.num_nodes / u.pp;
      int replicas = max_replicas;
      if (options_.rate.has_value()) {
        replicas = static_cast<int>(std::ceil(*options_.rate / unit_bound - 1e-9));
        if (replicas > max_replicas) continue;
      }
      Placement placement;
      placement.prefill = {{u.tp_p, u.pp}, u.k_p * replicas, u.gp};
      placement.decode = {{u.tp_d, u.pp}, u.k_d * replicas, u.gd};
      placement.kv_same_node = true;
      placement.num_units = replicas;
      placement.num_devices = unit_devices * replicas;
      const SimDeployment unit{.mode = SimMode::kDisaggregated,
                               .prefill = Phase({u.tp_p, u.pp}, u.k_p, u.pp > 1),
                               .decode = Phase({u.tp_d, u.pp}, u.k_d, u.pp > 1),
                               .kv_same_node = true,
                               .block_size = options_.block_size,
          .prefix_caching = options_.prefix_caching};
      RETURN_IF_ERROR(Score(unit, replicas, unit_bound, placement));
      out.push_back(placement);
    }
    explanation.push_back(absl::StrCat("low affinity: ", units.size(),
                                       " node units (same stage of prefill and decode per node) simulated"));
    return out;
  }

  absl::StatusOr<std::vector<Placement>> Colocated(std::vector<std::string>& explanation) {
    struct Option {
      Parallelism p;
      bool chunked;
      double goodput;
    };
    std::vector<Option> options;
    const SloTargets slo = options_.slo;
    auto both = [slo](const SimResult& r) { return Attainment(r, slo); };
    for (Parallelism p : Candidates(cluster_.num_devices(), options_.max_pp)) {
      for (bool chunked : {false, true}) {
        const bool cross = p.num_devices() > cluster_.devices_per_node;
        ASSIGN_OR_RETURN(double g, Goodput({.mode = SimMode::kColocated,
                                            .colocated_phase = Phase(p, 1, cross, chunked),
                                            .block_size = options_.block_size,
                                            .prefix_caching = options_.prefix_caching},
                                           both, InitialRate(p)));
        if (g > 0) options.push_back({p, chunked, g});
      }
    }
    std::stable_sort(options.begin(), options.end(), [](const Option& a, const Option& b) {
      return std::make_tuple(-a.goodput / a.p.num_devices(), a.p.num_devices()) <
             std::make_tuple(-b.goodput / b.p.num_devices(), b.p.num_devices());
    });
    const size_t top = static_cast<size_t>(std::max(1, options_.num_verified));
    if (options.size() > top) options.resize(top);
    std::vector<Placement> out;
    for (const Option& o : options) {
      int n = cluster_.num_devices() / o.p.num_devices();
      if (options_.rate.has_value()) {
        n = static_cast<int>(std::ceil(*options_.rate / o.goodput - 1e-9));
        if (n * o.p.num_devices() > cluster_.num_devices()) continue;
      }
      Placement placement;
      placement.colocated = true;
      placement.colocated_phase = {o.p, n, o.goodput, o.chunked};
      placement.num_devices = n * o.p.num_devices();
      const SimDeployment deployment{
          .mode = SimMode::kColocated,
          .colocated_phase = Phase(o.p, n, o.p.num_devices() > cluster_.devices_per_node, o.chunked),
          .block_size = options_.block_size,
          .prefix_caching = options_.prefix_caching};
      RETURN_IF_ERROR(Score(deployment, 1, o.goodput * n, placement));
      out.push_back(placement);
    }
    if (!out.empty()) {
      explanation.push_back(absl::StrFormat(
          "colocated alone: best %s%s serves %.3g req/s per instance", Describe(out[0].colocated_phase.parallelism),
          out[0].colocated_phase.chunked_prefill ? " (chunked prefill)" : "", out[0].colocated_phase.goodput_alone));
    }
    return out;
  }

 private:
  static std::string PhaseLine(const std::string& what, const std::vector<PhaseGoodput>& ranked) {
    std::string line = absl::StrCat(what, ":");
    if (ranked.empty()) return absl::StrCat(line, " no configuration meets the objective at any rate");
    for (size_t i = 0; i < std::min<size_t>(3, ranked.size()); ++i) {
      absl::StrAppendFormat(&line, "%s %s %.3g req/s (%.3g per device)", i == 0 ? "" : ";",
                            Describe(ranked[i].parallelism), ranked[i].goodput, ranked[i].per_device());
    }
    return line;
  }

  const StepLatencyModel& model_;
  const ClusterSpec& cluster_;
  std::span<const SimRequest> unit_;
  const PlanOptions& options_;
  double mean_input_ = 0;
  int num_simulations_ = 0;
  std::map<std::tuple<int, int, bool>, double> prefill_alone_;
  std::map<std::tuple<int, int, bool>, double> decode_alone_;
};

}  // namespace

absl::StatusOr<double> GoodputByBisection(
    const std::function<absl::StatusOr<double>(double rate)>& attainment_at, double target,
    double initial_rate, double rel_tolerance, double min_rate, double max_rate) {
  if (!(initial_rate > 0) || !(rel_tolerance > 0) || !(target > 0 && target <= 1)) {
    return absl::InvalidArgumentError("bisection: initial rate, tolerance and target must be positive");
  }
  double rate = std::clamp(initial_rate, min_rate, max_rate);
  ASSIGN_OR_RETURN(double attained, attainment_at(rate));
  double lo = 0, hi = 0;
  if (attained >= target) {
    lo = rate;
    while (true) {
      if (lo >= max_rate) return lo;
      const double next = std::min(lo * 2, max_rate);
      ASSIGN_OR_RETURN(double a, attainment_at(next));
      if (a < target) {
        hi = next;
        break;
      }
      lo = next;
    }
  } else {
    hi = rate;
    while (true) {
      if (hi <= min_rate) return 0.0;
      const double next = std::max(hi / 2, min_rate);
      ASSIGN_OR_RETURN(double a, attainment_at(next));
      if (a >= target) {
        lo = next;
        break;
      }
      hi = next;
    }
  }
  while ((hi - lo) / lo > rel_tolerance) {
    const double mid = (lo + hi) / 2;
    ASSIGN_OR_RETURN(double a, attainment_at(mid));
    (a >= target ? lo : hi) = mid;
  }
  return lo;
}

std::vector<SimRequest> AtRate(std::span<const SimRequest> unit_rate_requests, double rate) {
  std::vector<SimRequest> out(unit_rate_requests.begin(), unit_rate_requests.end());
  for (SimRequest& r : out) r.arrival_s /= rate;
  return out;
}

absl::StatusOr<PlanReport> PlanPlacement(const StepLatencyModel& model, const ClusterSpec& cluster,
                                         std::span<const SimRequest> unit_rate_requests,
                                         const PlanOptions& options) {
  if (cluster.num_nodes < 1 || cluster.devices_per_node < 1) {
    return absl::InvalidArgumentError("the cluster needs at least one node of one device");
  }
  if (unit_rate_requests.empty()) return absl::InvalidArgumentError("the workload has no requests");
  if (!(options.slo.ttft_s > 0) || !(options.slo.tpot_s > 0)) {
    return absl::InvalidArgumentError("the TTFT and TPOT objectives must be > 0");
  }
  if (!(options.attainment > 0 && options.attainment <= 1)) {
    return absl::InvalidArgumentError("the attainment target must be in (0, 1]");
  }
  if (options.rate.has_value() && !(*options.rate > 0)) {
    return absl::InvalidArgumentError("the rate must be > 0");
  }
  Search search(model, cluster, unit_rate_requests, options);
  PlanReport report;
  if (search.Candidates(cluster.num_devices(), options.max_pp).empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no (tp, pp) fits ", model.model().name, " on this cluster: ",
        model.Check({std::min(cluster.devices_per_node, 8), 1}).message()));
  }
  ASSIGN_OR_RETURN(report.disaggregated, options.affinity == Affinity::kHigh
                                             ? search.HighAffinity(report.explanation)
                                             : search.LowAffinity(report.explanation));
  ASSIGN_OR_RETURN(report.colocated, search.Colocated(report.explanation));
  auto rank = [](std::vector<Placement>& v) {
    std::stable_sort(v.begin(), v.end(),
                     [](const Placement& a, const Placement& b) { return RankKey(a) < RankKey(b); });
  };
  rank(report.disaggregated);
  rank(report.colocated);
  report.num_simulations = search.num_simulations();
  return report;
}

}  // namespace baton::scheduler::planner
