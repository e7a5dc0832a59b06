// `baton plan calibrate`: fits how much slower steps ran in a served run than `baton plan profile`
// timed them alone (scheduler/planner/serving_calibration.h), from the workers' step traces
// (`baton serve --step-trace-dir`; any deployment) or from the records `baton bench --output` wrote
// against a 1 prefill + 1 decode deployment, and writes the coefficients file back with that
// "serving_slowdown".
//
// Exit codes: 0 ok; 2 bad usage (a missing flag); 1 anything else (unreadable files, records that
// cannot calibrate, the output file). Every failure is one line on stderr.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "benchmarks/bench/record_io.h"
#include "cli/commands.h"
#include "scheduler/planner/latency_coefficients.h"
#include "scheduler/planner/serving_calibration.h"

namespace baton::cli {
namespace {

namespace planner = ::baton::scheduler::planner;

constexpr std::string_view kCommand = "baton plan calibrate";

struct PlanCalibrateOptions {
  std::string coefficients;
  std::vector<std::string> records;
  std::vector<std::string> step_traces;  // files, or directories of *.jsonl files
  std::string output;
};

// The measured requests of one run (warm-up, failed and untimed ones left out), on one clock.
absl::StatusOr<std::vector<planner::ServedRequest>> ServedRequests(const std::string& path) {
  absl::StatusOr<std::vector<bench::RequestRecord>> records = bench::ReadRecordsJsonl(path);
  if (!records.ok()) return records.status();
  int64_t origin_us = std::numeric_limits<int64_t>::max();
  for (const bench::RequestRecord& r : *records) {
    if (r.server.has_value() && r.server->prefill_start_us > 0) origin_us = std::min(origin_us, r.server->prefill_start_us);
  }
  auto seconds = [origin_us](int64_t us) { return static_cast<double>(us - origin_us) / 1e6; };
  std::vector<planner::ServedRequest> out;
  for (const bench::RequestRecord& r : *records) {
    if (r.warmup || !r.ok || !r.server.has_value()) continue;
    const bench::ServerTiming& t = *r.server;
    if (t.prefill_start_us <= 0 || t.prefill_end_us <= 0 || t.token_emit_us.empty()) continue;
    planner::ServedRequest req{.input_len = r.num_prompt_tokens > 0 ? r.num_prompt_tokens : r.input_len,
                               .num_cached_tokens = std::max(r.num_cached_tokens, 0),
                               .prefill_start_s = seconds(t.prefill_start_us),
                               .prefill_end_s = seconds(t.prefill_end_us),
                               .decode_start_s = t.kv_transfer_end_us > 0 ? seconds(t.kv_transfer_end_us) : 0};
    for (int64_t us : t.token_emit_us) req.token_s.push_back(seconds(us));
    out.push_back(std::move(req));
  }
  return out;
}

absl::StatusOr<planner::ServingCalibration> FitFromStepTraces(const PlanCalibrateOptions& opts,
                                                              const planner::LatencyCoefficients& coefficients) {
  std::vector<std::filesystem::path> files;
  for (const std::string& given : opts.step_traces) {
    std::error_code error;
    if (std::filesystem::is_directory(given, error)) {
      for (const auto& entry : std::filesystem::directory_iterator(given, error)) {
        if (entry.path().extension() == ".jsonl") files.push_back(entry.path());
      }
    } else {
      files.push_back(given);
    }
    if (error) return absl::InvalidArgumentError(absl::StrCat(given, ": ", error.message()));
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(absl::StrJoin(opts.step_traces, ", "), ": no .jsonl step trace"));
  }
  std::vector<planner::InstanceTrace> traces;
  for (const std::filesystem::path& file : files) {
    std::ifstream in(file);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", file.string()));
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<planner::InstanceTrace> trace = planner::ParseStepTrace(text.str());
    if (!trace.ok()) return absl::InvalidArgumentError(absl::StrCat(file.string(), ": ", trace.status().message()));
    traces.push_back(*std::move(trace));
  }
  absl::StatusOr<planner::ServingCalibration> fit = planner::FitSlowdownFromStepTraces(traces, coefficients);
  if (!fit.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(absl::StrJoin(opts.step_traces, ", "), ": ", fit.status().message()));
  }
  return fit;
}

absl::StatusOr<planner::ServingCalibration> FitFromRecords(const PlanCalibrateOptions& opts,
                                                           const planner::LatencyCoefficients& coefficients) {
  const planner::TpCoefficients* tp1 = coefficients.ForTp(1);
  if (tp1 == nullptr) return absl::InvalidArgumentError(absl::StrCat(opts.coefficients, ": no tp 1 coefficients"));
  std::vector<planner::ServedRequest> served;
  double end_s = 0;  // the last token of the runs so far
  for (const std::string& path : opts.records) {
    absl::StatusOr<std::vector<planner::ServedRequest>> run = ServedRequests(path);
    if (!run.ok()) return run.status();
    // Runs are calibrated as one sample set, each on its own clock: lay them an hour apart so no
    // request of one run overlaps another run's.
    const double offset = served.empty() ? 0 : end_s + 3600;
    for (planner::ServedRequest& r : *run) {
      r.prefill_start_s += offset;
      r.prefill_end_s += offset;
      if (r.decode_start_s > 0) r.decode_start_s += offset;
      for (double& t : r.token_s) t += offset;
      end_s = std::max(end_s, r.token_s.back());
    }
    served.insert(served.end(), run->begin(), run->end());
  }
  absl::StatusOr<planner::ServingCalibration> fit = planner::FitServingSlowdown(served, *tp1);
  if (!fit.ok()) return absl::InvalidArgumentError(absl::StrCat(absl::StrJoin(opts.records, ", "), ": ", fit.status().message()));
  return fit;
}

absl::Status RunPlanCalibrate(const PlanCalibrateOptions& opts) {
  absl::StatusOr<planner::LatencyCoefficients> coefficients = planner::LoadLatencyCoefficients(opts.coefficients);
  if (!coefficients.ok()) return coefficients.status();
  const bool from_traces = !opts.step_traces.empty();
  absl::StatusOr<planner::ServingCalibration> fit =
      from_traces ? FitFromStepTraces(opts, *coefficients) : FitFromRecords(opts, *coefficients);
  if (!fit.ok()) return fit.status();
  coefficients->serving_slowdown = fit->slowdown;
  coefficients->source =
      absl::StrCat(coefficients->source, "; serving slowdown from ", from_traces ? "step traces " : "",
                   absl::StrJoin(from_traces ? opts.step_traces : opts.records, ", "));
  std::ofstream file(opts.output, std::ios::trunc);
  file << planner::LatencyCoefficientsToJson(*coefficients);
  file.close();
  if (!file) return absl::InternalError(absl::StrCat("--output: cannot write ", opts.output));
  const planner::ServingSlowdown& s = fit->slowdown;
  std::printf("prefill: %.3fx alone (%d steps), %.3fx beside a busy instance (%d steps)\n", s.prefill_alone,
              fit->prefill_alone_samples, s.prefill_shared, fit->prefill_shared_samples);
  const char* decode_unit = from_traces ? "steps" : "token gaps";
  std::printf("decode:  %.3fx alone (%d %s), %.3fx beside a busy instance (%d %s)\n", s.decode_alone,
              fit->decode_alone_samples, decode_unit, s.decode_shared, fit->decode_shared_samples, decode_unit);
  std::printf("wrote %s\n", opts.output.c_str());
  return absl::OkStatus();
}

}  // namespace

void RegisterPlanCalibrateCommand(CLI::App& plan, int* exit_code) {
  auto opts = std::make_shared<PlanCalibrateOptions>();
  CLI::App* cmd = plan.add_subcommand(
      "calibrate",
      "Fit how much slower served steps run than profiled ones, from the workers' step traces or from "
      "baton bench records of a 1 prefill + 1 decode run");
  cmd->add_option("--coefficients", opts->coefficients, "Coefficients JSON from baton plan profile (required)");
  cmd->add_option("--step-traces", opts->step_traces,
                  "Step trace files, or directories of them (baton serve --step-trace-dir); any deployment");
  cmd->add_option("--records", opts->records,
                  "baton bench --output JSONL files of a 1 prefill + 1 decode run (one or more)");
  cmd->add_option("--output", opts->output, "Coefficients JSON to write, with the serving slowdown (required)");
  cmd->callback([opts, exit_code] {
    if (opts->coefficients.empty() || opts->records.empty() == opts->step_traces.empty() ||
        opts->output.empty()) {
      std::fprintf(stderr, "%.*s: --coefficients, --output and one of --step-traces and --records are required\n",
                   static_cast<int>(kCommand.size()), kCommand.data());
      *exit_code = 2;
      return;
    }
    if (const absl::Status status = RunPlanCalibrate(*opts); !status.ok()) {
      std::fprintf(stderr, "%.*s: %.*s\n", static_cast<int>(kCommand.size()), kCommand.data(),
                   static_cast<int>(status.message().size()), status.message().data());
      *exit_code = 1;
    }
  });
}

}  // namespace baton::cli
