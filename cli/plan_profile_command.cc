// `baton plan profile`: times the real engine's prefill and decode steps on this machine's CPU and
// writes the fitted latency coefficients (scheduler/planner/engine_profiler.h) as the JSON file
// that `baton plan` reads.
//
// Exit codes: 0 ok; 2 bad usage (a missing or malformed flag, a device other than cpu, a tp the
// model cannot be split over); 1 anything else (a model that cannot be read, the engine, the fit,
// the output file). Every failure is one line on stderr.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/parallel_layout.h"
#include "runtime/model/model_config.h"
#include "scheduler/planner/engine_profiler.h"
#include "scheduler/planner/latency_coefficients.h"

namespace baton::cli {
namespace {

namespace planner = ::baton::scheduler::planner;

constexpr std::string_view kCommand = "baton plan profile";

struct PlanProfileOptions {
  std::string model_dir;
  std::string device;
  std::string dtype = "f32";
  std::string kv_cache_dtype = "f32";
  int threads = 1;  // on `cpu` a device is one core: one compute thread per rank
  std::string tps = "1";
  int repeats = planner::ProfileOptions{}.repeats;
  std::string output;
};

// A failure with its exit code; the message is the whole line after "baton plan profile: ".
struct Failure {
  int exit_code;
  std::string message;
};

Failure Usage(std::string message) { return {2, std::move(message)}; }

// The flags, checked before anything loads; fills the profiler's options.
std::optional<Failure> CheckFlags(const PlanProfileOptions& opts, planner::ProfileOptions* out) {
  if (opts.model_dir.empty() || opts.device.empty() || opts.output.empty()) {
    return Usage("--model, --device and --output are required");
  }
  if (opts.device != "cpu") {
    return Usage(absl::StrCat("--device: '", opts.device,
                              "': only cpu can be profiled here; GPU step times need the GPU "
                              "engine path, which this command does not drive yet"));
  }
  if (const std::optional<DType> dtype = DTypeFromName(opts.dtype)) {
    out->weight_dtype = *dtype;
  } else {
    return Usage(absl::StrCat("--dtype: '", opts.dtype, "' (f32, bf16, f16, i8, i4 or fp8)"));
  }
  const std::optional<DType> kv_dtype = KvDTypeFromName(opts.kv_cache_dtype, out->weight_dtype);
  if (!kv_dtype) {
    return Usage(
        absl::StrCat("--kv-cache-dtype: '", opts.kv_cache_dtype, "' (f32, bf16 or auto)"));
  }
  out->kv_cache_dtype = *kv_dtype;
  if (opts.threads < 1) return Usage(absl::StrCat("--threads: ", opts.threads, ", must be >= 1"));
  if (opts.repeats < 1) return Usage(absl::StrCat("--repeats: ", opts.repeats, ", must be >= 1"));
  out->tps.clear();
  for (absl::string_view part : absl::StrSplit(opts.tps, ',', absl::SkipWhitespace())) {
    int tp = 0;
    if (!absl::SimpleAtoi(part, &tp) || tp < 1) {
      return Usage(absl::StrCat("--tp: '", part, "' is not a positive integer"));
    }
    out->tps.push_back(tp);
  }
  if (out->tps.empty()) return Usage("--tp: no tensor-parallel degree given");
  out->model_dir = opts.model_dir;
  out->num_threads_per_rank = opts.threads;
  out->repeats = opts.repeats;
  return std::nullopt;
}

void PrintSummary(const planner::ProfileResult& result, double seconds, const std::string& output) {
  const planner::LatencyCoefficients& c = result.coefficients;
  std::printf("%s\nprofiled in %.1f s\n", c.source.c_str(), seconds);
  for (const planner::TpProfile& profile : result.per_tp) {
    const planner::TpCoefficients& tp = c.by_tp.at(profile.tp);
    std::printf(
        "tp %d prefill: %.4g + %.4g * tokens + %.4g * tokens^2 ms  (%zu samples, relative RMS "
        "error %.1f%%)\n",
        profile.tp, tp.prefill.a_ms, tp.prefill.b_ms, tp.prefill.c_ms,
        profile.prefill_samples.size(), 100 * profile.prefill_relative_rms_error);
    std::printf(
        "tp %d decode:  %.4g + %.4g * context + %.4g * batch ms  (%zu samples, relative RMS error "
        "%.1f%%)\n",
        profile.tp, tp.decode.a_ms, tp.decode.b_ms, tp.decode.c_ms, profile.decode_samples.size(),
        100 * profile.decode_relative_rms_error);
  }
  std::printf("wrote %s\n", output.c_str());
}

std::optional<Failure> RunPlanProfile(const PlanProfileOptions& opts) {
  planner::ProfileOptions options;
  if (std::optional<Failure> failure = CheckFlags(opts, &options)) return failure;

  // The model first: unreadable is a runtime failure (1), a tp it cannot be split over is bad
  // usage (2), both before any weight loads.
  const absl::StatusOr<runtime::ModelConfig> model = runtime::LoadModelConfig(options.model_dir);
  if (!model.ok()) return Failure{1, std::string(model.status().message())};
  for (int tp : options.tps) {
    const absl::StatusOr<std::vector<runtime::ModelShard>> shards =
        PlanShards(*model, runtime::ParallelLayout{.tp_size = tp, .pp_size = 1});
    if (!shards.ok()) return Usage(absl::StrCat("--tp ", tp, ": ", shards.status().message()));
  }

  // Fail before minutes of profiling, not after.
  const std::filesystem::path output_dir =
      std::filesystem::absolute(std::filesystem::path(opts.output)).parent_path();
  if (::access(output_dir.c_str(), W_OK) != 0) {
    return Failure{1, absl::StrCat("--output: cannot write into ", output_dir.string())};
  }
  options.progress = [](std::string_view line) {
    std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
  };
  const auto start = std::chrono::steady_clock::now();
  const absl::StatusOr<planner::ProfileResult> result = planner::ProfileEngine(options);
  if (!result.ok()) return Failure{1, std::string(result.status().message())};
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::ofstream file(opts.output, std::ios::trunc);
  file << planner::LatencyCoefficientsToJson(result->coefficients) << "\n";
  file.close();
  if (!file) return Failure{1, absl::StrCat("--output: cannot write ", opts.output)};
  PrintSummary(*result, seconds, opts.output);
  return std::nullopt;
}

}  // namespace

void RegisterPlanProfileCommand(CLI::App& plan, int* exit_code) {
  auto opts = std::make_shared<PlanProfileOptions>();
  CLI::App* cmd = plan.add_subcommand(
      "profile",
      "Time the engine's prefill and decode steps and fit the planner's latency coefficients");
  cmd->add_option("--model", opts->model_dir, "Hugging Face checkpoint directory (required)");
  cmd->add_option("--device", opts->device, "What to profile: cpu (one core per rank; required)");
  cmd->add_option("--dtype", opts->dtype,
                  "Weight dtype for matmuls: f32, bf16, f16, i8, i4 or fp8 (int8 / int4 / fp8 "
                  "quantized at load)")
      ->capture_default_str();
  cmd->add_option("--kv-cache-dtype", opts->kv_cache_dtype, "KV cache elements: f32, bf16 or auto (bf16 for bf16 weights, else f32)")
      ->capture_default_str();
  cmd->add_option("--threads", opts->threads, "Compute threads per rank")->capture_default_str();
  cmd->add_option("--tp", opts->tps, "Tensor-parallel degrees to profile, comma-separated")
      ->capture_default_str();
  cmd->add_option("--repeats", opts->repeats, "Timed steps per grid point (the median is kept)")
      ->capture_default_str();
  cmd->add_option("--output", opts->output, "Coefficients JSON file to write (required)");
  cmd->callback([opts, exit_code] {
    if (const std::optional<Failure> failure = RunPlanProfile(*opts)) {
      std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(kCommand.size()), kCommand.data(),
                   failure->message.c_str());
      *exit_code = failure->exit_code;
    }
  });
}

}  // namespace baton::cli
