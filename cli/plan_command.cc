// `baton plan`: the offline placement planner (DESIGN.md, "The planner"). Model, cluster, workload
// and SLOs in; the ranked configurations, the best deployment as JSON, and a deployment config that
// `baton serve --config` runs out. The work is scheduler/planner's; this file reads the flags,
// resolves the model, device, coefficients and workload, and prints.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "benchmarks/bench/arrivals.h"
#include "benchmarks/bench/plan.h"
#include "benchmarks/bench/summary.h"
#include "benchmarks/bench/trace.h"
#include "benchmarks/bench/prefix_workloads.h"
#include "benchmarks/bench/workload.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "cli/signals.h"
#include "kernels/common/dtype.h"
#include "kernels/common/status_macros.h"
#include "nlohmann/json.hpp"
#include "runtime/model/model_config.h"
#include "runtime/tokenizer/tokenizer.h"
#include "scheduler/config/deployment_config.h"
#include "scheduler/planner/device_spec.h"
#include "scheduler/planner/latency_coefficients.h"
#include "scheduler/planner/model_shape.h"
#include "scheduler/planner/placement_search.h"
#include "scheduler/planner/roofline.h"
#include "scheduler/planner/step_latency_model.h"

namespace baton::cli {
namespace {

namespace planner = scheduler::planner;
using Json = nlohmann::json;

struct PlanFlags {
  std::string model;
  std::string device;
  int nodes = 1;
  int devices_per_node = 1;
  std::string workload = "chatbot";
  std::string workload_dir = BATON_SOURCE_DIR "/benchmarks/workloads";
  std::string tokenizer;
  std::optional<double> slo_ttft_s;
  std::optional<double> slo_tpot_s;
  double attainment = 0.9;
  std::optional<double> rate;
  std::string coefficients;
  std::string affinity = "high";
  std::string dtype = "bf16";
  std::string kv_cache_dtype;  // empty: f32 on cpu (Baton's default), bf16 on GPUs
  std::string kv_cache_bytes;
  double swap_space_gib = 0;  // per device, as vLLM's per-GPU --swap-space
  int max_num_seqs = 256;
  int max_num_batched_tokens = 2048;
  int max_pp = 8;
  int num_requests = 2000;
  int multi_turn = 0;         // > 0: sessions of this many turns (bench's --multi-turn)
  double think_time_s = 1.0;
  bool no_prefix_caching = false;
  uint64_t seed = 0;
  bool explain = false;
  bool json = false;
  std::string output;
  std::string deployment;       // evaluate this deployment config instead of searching
  std::optional<int> num_warmup;  // --deployment: leading requests left out (bench's default 10%)
};

// What the planner runs on, resolved from the flags.
struct PlanInputs {
  planner::ModelShape shape;
  std::optional<std::filesystem::path> model_dir;  // a checkpoint (else a known name)
  DType weight_dtype = DType::kBF16;
  DType kv_cache_dtype = DType::kF32;
  planner::DeviceSpec device;
  planner::LatencyCoefficients coefficients;
  std::vector<planner::SimRequest> unit_rate_requests;
  std::vector<std::string> notes;
};

// Every DType names a weight dtype: i8 and fp8 (--quantization int8 / fp8) a byte per parameter,
// i4 (--quantization int4) 4.5 bits (planner::BytesPerParam).
absl::StatusOr<DType> ParseDtype(const std::string& name) {
  if (const std::optional<DType> dtype = DTypeFromName(name)) return *dtype;
  return absl::InvalidArgumentError(
      absl::StrCat("--dtype ", name, ": expected bf16, f16, f32, i8, i4 or fp8"));
}

// DistServe's published fits ship for the models they cover on a100 (scheduler/planner/data/).
std::filesystem::path ShippedCoefficients(const std::string& model, const std::string& device) {
  return std::filesystem::path(BATON_SOURCE_DIR) / "scheduler/planner/data" /
         absl::StrCat(model, ".", device, ".distserve.json");
}

absl::StatusOr<planner::ModelShape> ResolveShape(const PlanFlags& flags, PlanInputs& in) {
  if (std::filesystem::is_directory(flags.model)) {
    ASSIGN_OR_RETURN(const runtime::ModelConfig config, runtime::LoadModelConfig(flags.model));
    in.model_dir = std::filesystem::absolute(flags.model);
    return planner::ModelShapeFromConfig(config, in.weight_dtype,
                                         std::filesystem::path(flags.model).filename().string(),
                                         (std::filesystem::path(flags.model) / "config.json").string());
  }
  absl::StatusOr<planner::ModelShape> known = planner::KnownModelShape(flags.model);
  if (!known.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model ", flags.model, ": not a directory, and ", known.status().message()));
  }
  known->bytes_per_param = planner::BytesPerParam(in.weight_dtype);
  return known;
}

absl::StatusOr<planner::LatencyCoefficients> ResolveCoefficients(const PlanFlags& flags, PlanInputs& in) {
  if (!flags.coefficients.empty()) {
    absl::StatusOr<planner::LatencyCoefficients> loaded =
        planner::LoadLatencyCoefficients(flags.coefficients);
    if (!loaded.ok() && loaded.status().code() == absl::StatusCode::kNotFound) {
      return absl::InvalidArgumentError(loaded.status().message());
    }
    return loaded;
  }
  const std::filesystem::path shipped = ShippedCoefficients(in.shape.name, flags.device);
  if (!in.model_dir.has_value() && std::filesystem::exists(shipped)) {
    in.notes.push_back(absl::StrCat("latency model: ", shipped.filename().string(), " (DistServe's fits)"));
    return planner::LoadLatencyCoefficients(shipped.string());
  }
  if (flags.device == "cpu") {
    in.notes.push_back(
        "latency model: the cpu roofline is a rough guess; `baton plan profile` measures this machine");
  } else {
    in.notes.push_back(absl::StrCat("latency model: roofline of ", flags.device));
  }
  return planner::RooflineCoefficients(in.shape, in.device, {1, 2, 4, 8});
}

// The requests at a mean rate of 1/s: the very requests (arrivals and lengths) `baton bench`
// sends with the same workload and seed, scaled to the rate.
absl::StatusOr<std::vector<planner::SimRequest>> ResolveWorkload(const PlanFlags& flags, PlanInputs& in) {
  std::unique_ptr<runtime::Tokenizer> tokenizer;
  auto load_tokenizer = [&]() -> absl::Status {
    std::filesystem::path file = flags.tokenizer;
    if (file.empty()) {
      std::filesystem::path dir;
      if (in.model_dir.has_value()) {
        dir = *in.model_dir;
      } else {
        ASSIGN_OR_RETURN(dir, ResolveModelDir(""));
        in.notes.push_back("token counts of text prompts: the embedded default model's tokenizer (--tokenizer)");
      }
      file = dir / "tokenizer.json";
    }
    ASSIGN_OR_RETURN(tokenizer, runtime::Tokenizer::FromFile(file));
    return absl::OkStatus();
  };
  std::vector<bench::PlannedRequest> planned;
  absl::string_view workload = flags.workload;
  if (absl::ConsumePrefix(&workload, "trace:")) {
    absl::StatusOr<std::vector<bench::TraceEntry>> trace = bench::LoadTrace(std::string(workload), nullptr);
    if (!trace.ok() && trace.status().code() == absl::StatusCode::kFailedPrecondition) {
      RETURN_IF_ERROR(load_tokenizer());
      trace = bench::LoadTrace(std::string(workload), tokenizer.get());
    }
    if (!trace.ok()) return absl::InvalidArgumentError(trace.status().message());
    ASSIGN_OR_RETURN(bench::TracePlan plan,
                     bench::PlanTrace(*trace, {.seed = flags.seed, .rate_per_s = 1.0,
                                               .max_model_len = in.shape.max_context, .lengths_only = true},
                                      nullptr));
    planned = std::move(plan.requests);
    in.notes.push_back(absl::StrCat("workload: trace ", workload, ", ", planned.size(), " requests"));
  } else {
    if (workload == "random") {
      return absl::InvalidArgumentError("--workload random: not planned; give a trace:FILE of its lengths");
    }
    ASSIGN_OR_RETURN(const std::filesystem::path file, bench::NamedWorkloadFile(workload, flags.workload_dir));
    absl::StatusOr<bench::WorkloadDefinition> definition = bench::LoadWorkloadDefinition(file, nullptr);
    if (!definition.ok()) {  // a workload of texts needs the tokenizer to count its tokens
      RETURN_IF_ERROR(load_tokenizer());
      definition = bench::LoadWorkloadDefinition(file, tokenizer.get());
    }
    if (!definition.ok()) return definition.status();
    ASSIGN_OR_RETURN(const bench::ContextFitReport fit, bench::FitToContext(*definition, in.shape.max_context));
    const bench::PlanOptions plan_options{.num_requests = flags.num_requests, .seed = flags.seed,
                                          .lengths_only = true};
    if (flags.multi_turn > 0) {
      ASSIGN_OR_RETURN(planned, bench::PlanMultiTurn(*definition,
                                                     {.num_turns = flags.multi_turn,
                                                      .think_s = flags.think_time_s,
                                                      .max_model_len = in.shape.max_context},
                                                     {.rate_per_s = 1.0}, plan_options, nullptr));
      in.notes.push_back(absl::StrCat("workload: ", definition->name, " in sessions of ", flags.multi_turn,
                                      " turns (", flags.think_time_s, " s think time), ", flags.num_requests,
                                      " Poisson sessions simulated per rate (seed ", flags.seed, "); ",
                                      fit.ToString()));
    } else {
      ASSIGN_OR_RETURN(planned, bench::PlanWorkload(*definition, {.rate_per_s = 1.0}, plan_options, nullptr));
      in.notes.push_back(absl::StrCat("workload: ", definition->name, ", ", planned.size(),
                                      " Poisson requests simulated per rate (seed ", flags.seed, "); ",
                                      fit.ToString()));
    }
  }
  std::vector<planner::SimRequest> out;
  out.reserve(planned.size());
  for (const bench::PlannedRequest& r : planned) {
    out.push_back({.arrival_s = r.arrival_s, .input_len = r.input_len, .output_len = r.output_len,
                   .session = r.session, .turn = r.turn, .think_s = r.think_s});
  }
  return out;
}

absl::StatusOr<PlanInputs> ResolveInputs(const PlanFlags& flags) {
  if (flags.model.empty()) return absl::InvalidArgumentError("--model is required");
  if (flags.device.empty()) return absl::InvalidArgumentError("--device is required");
  if (!flags.slo_ttft_s.has_value() || !flags.slo_tpot_s.has_value()) {
    return absl::InvalidArgumentError("--slo-ttft and --slo-tpot are required (seconds)");
  }
  if (!(*flags.slo_ttft_s > 0) || !(*flags.slo_tpot_s > 0)) {
    return absl::InvalidArgumentError("--slo-ttft and --slo-tpot must be > 0 (seconds)");
  }
  if (flags.nodes < 1 || flags.devices_per_node < 1) {
    return absl::InvalidArgumentError("--nodes and --devices-per-node must be >= 1");
  }
  if (flags.num_requests < 10) return absl::InvalidArgumentError("--num-requests must be >= 10");
  if (!(flags.swap_space_gib >= 0 && flags.swap_space_gib <= 1 << 20)) {
    return absl::InvalidArgumentError("--swap-space must be in [0, 1048576] GiB");
  }
  if (flags.affinity != "high" && flags.affinity != "low") {
    return absl::InvalidArgumentError(absl::StrCat("--affinity ", flags.affinity, ": expected high or low"));
  }
  PlanInputs in;
  ASSIGN_OR_RETURN(in.weight_dtype, ParseDtype(flags.dtype));
  if (flags.kv_cache_dtype.empty()) {
    // Baton's default on the CPU; on GPUs a 16-bit cache, as DistServe's and vLLM's engines keep
    // (the written config then asks for bf16).
    in.kv_cache_dtype = flags.device == "cpu" ? DType::kF32 : DType::kBF16;
  } else {
    const std::optional<DType> kv_dtype = KvDTypeFromName(flags.kv_cache_dtype, in.weight_dtype);
    if (!kv_dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--kv-cache-dtype ", flags.kv_cache_dtype, ": expected f32, bf16 or auto"));
    }
    in.kv_cache_dtype = *kv_dtype;
  }
  absl::StatusOr<planner::DeviceSpec> device = planner::KnownDevice(flags.device);
  if (!device.ok()) return absl::InvalidArgumentError(absl::StrCat("--device: ", device.status().message()));
  in.device = *device;
  ASSIGN_OR_RETURN(in.shape, ResolveShape(flags, in));
  in.shape.kv_bytes_per_value = static_cast<int>(DTypeBytes(in.kv_cache_dtype));
  ASSIGN_OR_RETURN(in.coefficients, ResolveCoefficients(flags, in));
  ASSIGN_OR_RETURN(in.unit_rate_requests, ResolveWorkload(flags, in));
  return in;
}

// Device ids of each instance, rank order (stage-major). High affinity packs instances one after
// another; low affinity puts stage s of every instance of a unit on the unit's node s.
std::vector<std::vector<int>> AssignDevices(const planner::Placement& p, const planner::ClusterSpec& cluster,
                                            bool low_affinity, bool prefill) {
  const planner::PhaseChoice& phase = p.colocated ? p.colocated_phase : prefill ? p.prefill : p.decode;
  std::vector<std::vector<int>> out;
  if (!low_affinity || p.colocated) {
    int next = prefill || p.colocated ? 0 : p.prefill.num_devices();
    for (int i = 0; i < phase.num_instances; ++i) {
      std::vector<int>& ids = out.emplace_back();
      for (int d = 0; d < phase.parallelism.num_devices(); ++d) ids.push_back(next++);
    }
    return out;
  }
  const int pp = phase.parallelism.pp;
  const int num_units = p.num_units;
  const int per_unit_p = p.prefill.num_instances / num_units;
  const int per_unit_d = p.decode.num_instances / num_units;
  const int per_unit = prefill ? per_unit_p : per_unit_d;
  const int tp = phase.parallelism.tp;
  const int offset = prefill ? 0 : per_unit_p * p.prefill.parallelism.tp;
  for (int u = 0; u < num_units; ++u) {
    for (int i = 0; i < per_unit; ++i) {
      std::vector<int>& ids = out.emplace_back();
      for (int s = 0; s < pp; ++s) {
        const int node = u * pp + s;
        for (int r = 0; r < tp; ++r) ids.push_back(node * cluster.devices_per_node + offset + i * tp + r);
      }
    }
  }
  return out;
}

Json PhaseJson(const planner::PhaseChoice& phase, const std::vector<std::vector<int>>& devices) {
  return Json{{"tp", phase.parallelism.tp},
              {"pp", phase.parallelism.pp},
              {"instances", phase.num_instances},
              {"devices", devices},
              {"goodput_per_instance_alone", phase.goodput_alone}};
}

std::string Row(int rank, const planner::Placement& p) {
  auto phase = [](const planner::PhaseChoice& c) {
    return absl::StrFormat("%d x (tp %d, pp %d)%s", c.num_instances, c.parallelism.tp, c.parallelism.pp,
                           c.chunked_prefill ? " chunked" : "");
  };
  const std::string layout = p.colocated ? absl::StrCat("colocated ", phase(p.colocated_phase))
                                         : absl::StrCat("prefill ", phase(p.prefill), ", decode ", phase(p.decode));
  return absl::StrFormat("%4d  %-62s %7d %11.3f %11.3f %10.3f  %s", rank, layout, p.num_devices, p.goodput,
                         p.goodput_per_device, p.predicted_attainment, p.binding_phase);
}

// kv_cache_bytes: per instance, 0 for auto (GPU devices: their usable memory less the weights).
absl::Status WriteConfig(const PlanFlags& flags, const PlanInputs& in, const planner::PlanOptions& options,
                         uint64_t kv_cache_bytes, const planner::Placement& best,
                         const planner::ClusterSpec& cluster) {
  scheduler::DeploymentConfig config =
      scheduler::DefaultDeployment(in.model_dir.value_or(std::filesystem::path(in.shape.name)));
  config.weight_dtype = in.weight_dtype;
  config.kv_cache_dtype = in.kv_cache_dtype;
  config.mode = best.colocated ? scheduler::DeploymentMode::kColocated : scheduler::DeploymentMode::kDisaggregated;
  config.slo.ttft_ms = *flags.slo_ttft_s * 1e3;
  config.slo.tpot_ms = *flags.slo_tpot_s * 1e3;
  config.slo.attainment = flags.attainment;
  config.slo.admission = false;  // the plan's goodput is for every request served, none shed
  auto fill = [&](scheduler::PhaseConfig& out, const planner::PhaseChoice& phase, bool prefill) {
    out.num_instances = phase.num_instances;
    out.tp = phase.parallelism.tp;
    out.pp = phase.parallelism.pp;
    out.max_num_seqs = options.max_num_seqs;
    out.max_num_batched_tokens = options.max_num_batched_tokens;
    out.chunked_prefill = phase.chunked_prefill;
    if (flags.device == "cpu") {
      out.num_threads = 1;  // a device is one core
    } else {
      out.cuda_device_ids = AssignDevices(best, cluster, flags.affinity == "low", prefill);
    }
  };
  if (best.colocated) {
    fill(config.colocated, best.colocated_phase, true);
  } else {
    fill(config.prefill, best.prefill, true);
    fill(config.decode, best.decode, false);
    config.decode.base_port = config.prefill.base_port + best.prefill.num_instances;
  }
  config.internal_port = scheduler::DefaultInternalPort(config);
  for (scheduler::WorkerRole role : scheduler::Roles(config.mode)) {
    scheduler::PhaseConfig& phase = scheduler::MutablePhase(config, role);
    // Without --kv-cache-bytes the plan gave each GPU instance its devices' usable memory less the
    // weights: the runtime's auto budget with the same fraction, measured on the devices.
    phase.kv_cache_bytes = kv_cache_bytes;
    phase.gpu_memory_utilization = in.device.usable_memory_fraction;
    phase.swap_space_bytes =
        static_cast<uint64_t>(flags.swap_space_gib * (1ull << 30)) * phase.tp * phase.pp;
  }
  RETURN_IF_ERROR(scheduler::ValidateDeploymentConfig(config));
  std::ofstream out(flags.output);
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", flags.output));
  out << "# Written by baton plan" << (in.model_dir ? "" : " (model: replace it with the checkpoint's directory)")
      << "\n" << scheduler::ToYaml(config);
  return out.good() ? absl::OkStatus() : absl::InternalError(absl::StrCat("cannot write ", flags.output));
}

// `--deployment FILE --rate R`: the predicted attainment of a given deployment, for the requests a
// `baton bench --rate R --num-requests N --seed S` run sends, the first warm-up ones left out as
// bench leaves them out.
absl::Status EvaluateDeployment(const PlanFlags& flags, const PlanInputs& in,
                                const planner::StepLatencyModel& model) {
  if (!flags.rate.has_value() || !(*flags.rate > 0)) {
    return absl::InvalidArgumentError("--deployment needs --rate (req/s)");
  }
  ASSIGN_OR_RETURN(const scheduler::DeploymentConfig config, scheduler::LoadDeploymentConfig(flags.deployment));
  planner::ModelShape shape = in.shape;  // its KV cache as the deployment keeps it
  shape.kv_bytes_per_value = static_cast<int>(DTypeBytes(config.kv_cache_dtype));
  auto kv_tokens = [&](const scheduler::PhaseConfig& p) -> int64_t {
    if (p.kv_cache_bytes > 0) return static_cast<int64_t>(p.kv_cache_bytes / shape.KvBytesPerToken());
    // auto: gpu_memory_utilization of each device, less the instance's weights (model_ranks.h).
    const double usable = static_cast<double>(in.device.memory_bytes) * p.gpu_memory_utilization * p.tp * p.pp;
    return static_cast<int64_t>(std::max(0.0, usable - static_cast<double>(shape.WeightBytes())) /
                                shape.KvBytesPerToken());
  };
  auto phase = [&](const scheduler::PhaseConfig& p) {
    return planner::SimPhase{.parallelism = {p.tp, p.pp},
                             .num_instances = p.num_instances,
                             .max_num_seqs = p.max_num_seqs,
                             .max_num_batched_tokens = p.max_num_batched_tokens,
                             .chunked_prefill = p.chunked_prefill,
                             .kv_capacity_tokens = kv_tokens(p),
                             .swap_capacity_tokens = static_cast<int64_t>(
                                 p.swap_space_bytes / shape.KvBytesPerToken())};
  };
  const bool colocated = config.mode == scheduler::DeploymentMode::kColocated;
  const planner::SimDeployment deployment{
      .mode = colocated ? planner::SimMode::kColocated : planner::SimMode::kDisaggregated,
      .prefill = phase(config.prefill),
      .decode = phase(config.decode),
      .colocated_phase = phase(config.colocated),
      .kv_same_node = true,
      .block_size = config.block_size,
      .prefix_caching = config.enable_prefix_caching,
      .kv_aware_routing = config.routing_policy == scheduler::RoutingPolicy::kKvAware};
  const std::vector<planner::SimRequest> requests = planner::AtRate(in.unit_rate_requests, *flags.rate);
  absl::StatusOr<planner::SimResult> simulated = planner::Simulate(deployment, model, requests);
  if (!simulated.ok()) {
    // The config's own KV budget is what the runtime runs with: 256 MiB per CPU instance when
    // unset; GPU instances default to auto, a share of their devices.
    const bool kv = absl::StrContains(simulated.status().message(), "instance's KV");
    return absl::Status(simulated.status().code(),
                        absl::StrCat(flags.deployment, ": ", simulated.status().message(),
                                     kv ? "; give the phase a larger kv_cache_bytes" : ""));
  }
  planner::SimResult result = *std::move(simulated);
  const int warmup = flags.num_warmup.value_or(static_cast<int>(requests.size()) / 10);
  if (warmup < 0 || warmup >= static_cast<int>(requests.size())) {
    return absl::InvalidArgumentError("--warmup must be in [0, --num-requests)");
  }
  result.requests.erase(result.requests.begin(), result.requests.begin() + warmup);
  const planner::SloTargets slo{.ttft_s = *flags.slo_ttft_s, .tpot_s = *flags.slo_tpot_s};
  std::vector<double> ttft, tpot;
  for (const planner::RequestTiming& t : result.requests) {
    ttft.push_back(t.ttft_s);
    tpot.push_back(t.tpot_s);
  }
  // Percentiles as `baton bench` reports them, so predicted and measured figures compare.
  const bench::Stats ttft_stats = bench::ComputeStats(std::move(ttft));
  const bench::Stats tpot_stats = bench::ComputeStats(std::move(tpot));
  Json doc{{"deployment", flags.deployment},
           {"rate", *flags.rate},
           {"num_requests", result.requests.size()},
           {"predicted_attainment", planner::Attainment(result, slo)},
           {"ttft_attainment", planner::TtftAttainment(result, slo.ttft_s)},
           {"tpot_attainment", planner::TpotAttainment(result, slo.tpot_s)},
           {"ttft_p50_s", ttft_stats.p50},
           {"ttft_p90_s", ttft_stats.p90},
           {"tpot_p50_s", tpot_stats.p50},
           {"tpot_p90_s", tpot_stats.p90},
           {"num_preemptions", result.num_preemptions},
           {"num_swapped_blocks", result.num_swapped_blocks},
           {"latency_model", in.coefficients.source}};
  if (flags.json) {
    std::printf("%s\n", doc.dump(2).c_str());
  } else {
    for (const std::string& note : in.notes) std::printf("# %s\n", note.c_str());
    std::printf("%s at %.3g req/s: %.1f%% meet both SLOs (TTFT %.1f%%, TPOT %.1f%%); TTFT p50 %.3f s p90 %.3f s, "
                "TPOT p50 %.4f s p90 %.4f s; %d preemptions\n",
                flags.deployment.c_str(), *flags.rate, 100 * doc["predicted_attainment"].get<double>(),
                100 * doc["ttft_attainment"].get<double>(), 100 * doc["tpot_attainment"].get<double>(),
                ttft_stats.p50, ttft_stats.p90, tpot_stats.p50, tpot_stats.p90,
                result.num_preemptions);
  }
  return absl::OkStatus();
}

absl::Status RunPlan(const PlanFlags& flags) {
  ASSIGN_OR_RETURN(const PlanInputs in, ResolveInputs(flags));
  const planner::StepLatencyModel model(in.coefficients, in.shape, in.device);
  if (!flags.deployment.empty()) return EvaluateDeployment(flags, in, model);
  const planner::ClusterSpec cluster{.num_nodes = flags.nodes, .devices_per_node = flags.devices_per_node};
  planner::PlanOptions options{.slo = {.ttft_s = *flags.slo_ttft_s, .tpot_s = *flags.slo_tpot_s},
                               .attainment = flags.attainment,
                               .rate = flags.rate,
                               .affinity = flags.affinity == "low" ? planner::Affinity::kLow : planner::Affinity::kHigh,
                               .max_pp = flags.max_pp,
                               .max_num_seqs = flags.max_num_seqs,
                               .max_num_batched_tokens = flags.max_num_batched_tokens,
                               .prefix_caching = !flags.no_prefix_caching};
  uint64_t kv_cache_bytes = 0;
  if (!flags.kv_cache_bytes.empty()) {
    absl::StatusOr<uint64_t> bytes = scheduler::ParseByteSize(flags.kv_cache_bytes);
    if (!bytes.ok()) return absl::InvalidArgumentError(absl::StrCat("--kv-cache-bytes: ", bytes.status().message()));
    kv_cache_bytes = *bytes;
  } else if (flags.device == "cpu") {
    // The deployment default (256 MiB per instance), not this machine's RAM: what `baton serve` runs.
    kv_cache_bytes = 256ull << 20;
  }
  if (kv_cache_bytes > 0) {
    options.kv_capacity_tokens = static_cast<int64_t>(kv_cache_bytes / in.shape.KvBytesPerToken());
  }
  options.swap_tokens_per_device =
      static_cast<int64_t>(flags.swap_space_gib * (1ull << 30) / in.shape.KvBytesPerToken());
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(const planner::PlanReport report,
                   planner::PlanPlacement(model, cluster, in.unit_rate_requests, options));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (report.disaggregated.empty() && report.colocated.empty()) {
    return absl::FailedPreconditionError(
        flags.rate ? absl::StrCat("no configuration on this cluster serves ", *flags.rate, " req/s within the SLOs")
                   : "no configuration on this cluster meets the SLOs at any rate");
  }
  const planner::Placement* best_disagg = report.disaggregated.empty() ? nullptr : &report.disaggregated[0];
  const planner::Placement* best_coloc = report.colocated.empty() ? nullptr : &report.colocated[0];
  const planner::Placement& best =
      best_disagg != nullptr && (best_coloc == nullptr || best_disagg->goodput_per_device >= best_coloc->goodput_per_device)
          ? *best_disagg
          : *best_coloc;
  if (flags.json) {
    Json doc;
    if (best_disagg != nullptr) {
      doc["prefill"] = PhaseJson(best_disagg->prefill, AssignDevices(*best_disagg, cluster, flags.affinity == "low", true));
      doc["decode"] = PhaseJson(best_disagg->decode, AssignDevices(*best_disagg, cluster, flags.affinity == "low", false));
      doc["goodput_per_device"] = best_disagg->goodput_per_device;
      doc["goodput"] = best_disagg->goodput;
      doc["binding_phase"] = best_disagg->binding_phase;
      doc["predicted_attainment"] = best_disagg->predicted_attainment;
      doc["rate"] = best_disagg->rate;
    }
    if (best_coloc != nullptr) {
      doc["colocated"] = {{"tp", best_coloc->colocated_phase.parallelism.tp},
                          {"pp", best_coloc->colocated_phase.parallelism.pp},
                          {"instances", best_coloc->colocated_phase.num_instances},
                          {"chunked_prefill", best_coloc->colocated_phase.chunked_prefill},
                          {"goodput", best_coloc->goodput},
                          {"goodput_per_device", best_coloc->goodput_per_device},
                          {"predicted_attainment", best_coloc->predicted_attainment}};
    }
    doc["recommended"] = best.colocated ? "colocated" : "disaggregated";
    doc["latency_model"] = in.coefficients.source;
    doc["num_simulations"] = report.num_simulations;
    doc["seconds"] = seconds;
    if (flags.explain) doc["explanation"] = report.explanation;
    std::printf("%s\n", doc.dump(2).c_str());
  } else {
    for (const std::string& note : in.notes) std::printf("# %s\n", note.c_str());
    std::printf("# model %s on %d x %d %s; SLOs TTFT %.3g s, TPOT %.3g s, %.0f%% attainment%s\n",
                in.shape.name.c_str(), flags.nodes, flags.devices_per_node, flags.device.c_str(),
                *flags.slo_ttft_s, *flags.slo_tpot_s, flags.attainment * 100,
                flags.rate ? absl::StrFormat(", rate %.3g req/s", *flags.rate).c_str() : "");
    std::printf("%4s  %-62s %7s %11s %11s %10s  %s\n", "rank", "configuration", "devices", "goodput",
                "per device", "attained", "binding");
    int rank = 1;
    for (const planner::Placement& p : report.disaggregated) std::printf("%s\n", Row(rank++, p).c_str());
    for (const planner::Placement& p : report.colocated) std::printf("%s\n", Row(rank++, p).c_str());
    std::printf("# goodput in req/s; 'attained': simulated share meeting both SLOs at %s\n",
                flags.rate ? "--rate" : "the goodput");
    std::printf("# recommended: %s (%.3f req/s per device)\n", best.colocated ? "colocated" : "disaggregated",
                best.goodput_per_device);
    std::printf("# %d simulations in %.2f s\n", report.num_simulations, seconds);
    if (flags.explain) {
      for (const std::string& line : report.explanation) std::printf("# %s\n", line.c_str());
      if (best_disagg != nullptr) {
        std::printf("# binding phase: %s — at 1.25x its goodput, %.0f%% meet TTFT and %.0f%% meet TPOT\n",
                    best_disagg->binding_phase.c_str(), best_disagg->ttft_attainment_past * 100,
                    best_disagg->tpot_attainment_past * 100);
      }
      if (best_disagg != nullptr && best_coloc != nullptr && best_coloc->goodput_per_device > 0) {
        std::printf("# disaggregated / colocated goodput per device: %.2fx\n",
                    best_disagg->goodput_per_device / best_coloc->goodput_per_device);
      }
    }
  }
  if (!flags.output.empty()) {
    RETURN_IF_ERROR(WriteConfig(flags, in, options, kv_cache_bytes, best, cluster));
    if (!flags.json) std::printf("# deployment config written to %s\n", flags.output.c_str());
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterPlanCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<PlanFlags>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Offline placement planner: model + cluster + workload + SLOs in, deployment out");
  cmd->add_option("--model", flags->model, "Known model name (opt-13b, llama-3-8b, ...) or checkpoint dir");
  cmd->add_option("--device", flags->device, "a100 | h100 | h200 | cpu (on cpu a device is one core)");
  cmd->add_option("--nodes", flags->nodes, "Nodes in the cluster")->capture_default_str();
  cmd->add_option("--devices-per-node", flags->devices_per_node, "Devices per node")->capture_default_str();
  cmd->add_option("--workload", flags->workload, "chatbot | code | summarization | trace:FILE")
      ->capture_default_str();
  cmd->add_option("--workload-dir", flags->workload_dir, "Where the workload files are")->capture_default_str();
  cmd->add_option("--tokenizer", flags->tokenizer, "tokenizer.json counting text prompts' tokens");
  cmd->add_option("--slo-ttft", flags->slo_ttft_s, "TTFT objective, seconds");
  cmd->add_option("--slo-tpot", flags->slo_tpot_s, "TPOT objective, seconds");
  cmd->add_option("--attainment", flags->attainment, "Share of requests meeting both SLOs")
      ->capture_default_str()
      ->check(CLI::Range(1e-6, 1.0));
  cmd->add_option("--rate", flags->rate, "Requests/s to serve (default: the most the cluster serves)");
  cmd->add_option("--coefficients", flags->coefficients,
                  "Latency coefficients JSON (default: DistServe's for opt-13b/66b/175b on a100, else roofline)");
  cmd->add_option("--affinity", flags->affinity, "high | low node affinity (DistServe's two placements)")
      ->capture_default_str();
  cmd->add_option("--dtype", flags->dtype, "Weights: bf16 | f16 | f32 | i8 (int8, a byte each) | fp8 (E4M3, a byte each) | i4 (int4 in groups of 128, 4.5 bits each)")
      ->capture_default_str();
  cmd->add_option("--kv-cache-dtype", flags->kv_cache_dtype,
                  "KV cache elements: f32 | bf16 | auto (bf16 for bf16 weights, else f32) (default: f32 "
                  "on cpu, bf16 on GPUs); the written "
                  "config keeps it");
  cmd->add_option("--kv-cache-bytes", flags->kv_cache_bytes,
                  "KV budget per instance (default: device memory less weights; cpu: 256MiB)");
  cmd->add_option("--swap-space", flags->swap_space_gib,
                  "GiB of host memory per device for preempted sequences' KV, swapped out and back "
                  "instead of recomputed (vLLM's per-GPU --swap-space); the written config keeps it")
      ->capture_default_str();
  cmd->add_option("--max-num-seqs", flags->max_num_seqs, "Per instance")->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", flags->max_num_batched_tokens, "Per step")->capture_default_str();
  cmd->add_option("--max-pp", flags->max_pp, "Pipeline stages tried, 1..N")->capture_default_str();
  cmd->add_option("--num-requests", flags->num_requests, "Requests per simulation")->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Seed of arrivals and lengths (as baton bench's)")->capture_default_str();
  cmd->add_option("--multi-turn", flags->multi_turn,
                  "N > 0: the workload in conversations of N turns, as `baton bench --multi-turn` "
                  "sends them (--num-requests and rates count conversations)");
  cmd->add_option("--think-time", flags->think_time_s, "--multi-turn: seconds between an answer and the next turn")
      ->capture_default_str();
  cmd->add_flag("--no-enable-prefix-caching", flags->no_prefix_caching,
                "Simulate instances without prefix caching (the deployments' default has it)");
  cmd->add_flag("--explain", flags->explain, "Say which phase binds and why the winner wins");
  cmd->add_flag("--json", flags->json, "Print the best configuration as JSON");
  cmd->add_option("--output", flags->output, "Write the recommended deployment config (YAML) here");
  cmd->add_option("--deployment", flags->deployment,
                  "Instead of searching: predict this deployment config's attainment at --rate");
  cmd->add_option("--warmup", flags->num_warmup,
                  "--deployment: leading requests left out, as baton bench's (default 10%)");
  cmd->require_subcommand(0, 1);
  RegisterPlanProfileCommand(*cmd, exit_code);
  RegisterPlanCalibrateCommand(*cmd, exit_code);
  cmd->callback([cmd, flags, exit_code] {
    if (!cmd->get_subcommands().empty()) return;  // `baton plan profile` or `calibrate` ran
    *exit_code = ReportStatus("baton plan", RunPlan(*flags));
  });
}

}  // namespace baton::cli
