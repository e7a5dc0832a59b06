// `baton bench`: the open-loop load generator (benchmarks/bench/). One run at a fixed rate:
//   baton bench --server 127.0.0.1:50051 --workload chatbot --rate 2 --num-requests 200
//       --slo-ttft 1000 --slo-tpot 100 --output run.jsonl
// and the goodput search, a series of such runs (benchmarks/bench/goodput_search.h):
//   baton bench goodput --server 127.0.0.1:50051 --workload chatbot --slo-ttft 1000 --slo-tpot 100
//       --output-dir results/disagg
// vLLM's benchmark_serving spellings work too (vllm_flags.h): --request-rate, --num-prompts,
// --dataset-name sharegpt|random, --goodput ttft:MS tpot:MS, --base-url, --backend openai-chat and
// --endpoint /v1/chat/completions (the chat API: each prompt as one user message).
// The summary goes to stdout, notes and the progress bar to stderr. Ctrl-C stops the run: requests
// in flight are cancelled, what was recorded is written, and the exit code is 130.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "benchmarks/bench/bench_session.h"
#include "benchmarks/bench/client_openai.h"
#include "benchmarks/bench/goodput_search.h"
#include "benchmarks/bench/record_io.h"
#include "benchmarks/bench/vllm_flags.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "cli/signals.h"
#include "kernels/common/status_macros.h"
#include "nlohmann/json.hpp"
#include "runtime/process/deployment_secret.h"

namespace baton::cli {
namespace {

using bench::BenchConfig;
using bench::BenchSession;

constexpr int kExitInterrupted = 130;

// Flags shared by `bench` and `bench goodput`.
struct CommonOptions {
  std::string server;
  std::string openai_url;
  std::string model_name;
  std::string api_key;
  std::string model_dir;
  std::string tokenizer;
  std::string workload = "chatbot";
  std::string dataset_name;            // vLLM's name for a workload: sharegpt | random
  std::vector<std::string> goodput;    // vLLM's --goodput ttft:MS tpot:MS
  std::string backend;                 // vLLM's --backend: openai | vllm | openai-chat
  std::string endpoint;                // vLLM's --endpoint: /v1/completions | /v1/chat/completions
  std::string workload_dir = BATON_SOURCE_DIR "/benchmarks/workloads";
  std::string corpus = bench::kDefaultCorpusDir;
  std::string random_input_len = "128";
  std::string random_output_len = "128";
  bench::PrefixRepetitionSpec prefix_repetition;
  int multi_turn = 0;
  double think_time_s = 1.0;
  std::string arrival;  // empty: poisson, or gamma when --burstiness is given
  std::optional<double> burstiness;
  uint64_t seed = 0;
  std::optional<double> slo_ttft_ms;
  std::optional<double> slo_tpot_ms;
  int max_concurrency = 512;
  int max_model_len = 0;
  double request_timeout_s = 600;
  std::string prompt_format;  // empty: ids, or text on the chat endpoint
  std::string label;
  bool no_progress = false;
  std::vector<std::string> faults;
  std::string fault_registry;
  std::string secret_file;
};

struct RunOptions {
  CommonOptions common;
  std::optional<double> rate;
  std::optional<int> num_requests;  // default 100; a trace: all of it
  std::optional<int> num_warmup;
  std::string output;
  std::string summary_json;
};

struct GoodputOptions {
  CommonOptions common;
  double target_attainment = 0.9;
  double initial_rate = 1.0;
  double max_rate = 1e4;
  double min_duration_s = 60;
  int min_requests = 100;
  double warmup_fraction = 0.1;
  double tolerance = 0.05;
  int max_runs = 16;
  std::string output_dir;
};

void AddCommonOptions(CLI::App* cmd, CommonOptions& o) {
  cmd->add_option("--server", o.server, "HOST:PORT of Baton's gRPC API");
  cmd->add_option(
      "--openai-url,--base-url", o.openai_url,
      "Base URL of an OpenAI-compatible server (http://HOST:PORT; /v1/completions, SSE; "
      "/v1/chat/completions for the chat API)");
  cmd->add_option("--backend", o.backend,
                  "vLLM's name for the API spoken: openai or vllm (/v1/completions), openai-chat "
                  "(/v1/chat/completions); default URL http://127.0.0.1:8000");
  cmd->add_option("--endpoint", o.endpoint,
                  "Path of the OpenAI endpoint, as vLLM's: /v1/completions or /v1/chat/completions "
                  "(the chat API: each prompt as one user message, sent as text)");
  cmd->add_option("--api-key", o.api_key,
                  "The server's API key, sent as a Bearer token (default: $BATON_API_KEY)")
      ->envname("BATON_API_KEY");
  cmd->add_option("--model-name", o.model_name,
                  "OpenAI request's model (default: the server's first in /v1/models)");
  cmd->add_option(
      "--model", o.model_dir,
      "Served model's directory, for its tokenizer.json (default: the embedded default model)");
  cmd->add_option("--tokenizer", o.tokenizer,
                  "The served model's tokenizer.json (overrides --model)");
  CLI::Option* workload =
      cmd->add_option("--workload", o.workload,
                      "chatbot | code | summarization | random | shared-prefix | trace:FILE")
          ->capture_default_str();
  cmd->add_option("--dataset-name", o.dataset_name,
                  "vLLM's name for a workload: sharegpt (= chatbot), random or prefix_repetition "
                  "(= shared-prefix)")
      ->excludes(workload);
  cmd->add_option("--prefix-repetition-prefix-len", o.prefix_repetition.prefix_len,
                  "shared-prefix: tokens of each shared prefix (a system prompt)")
      ->capture_default_str();
  cmd->add_option("--prefix-repetition-suffix-len", o.prefix_repetition.suffix_len,
                  "shared-prefix: tokens of each request's own suffix (its question)")
      ->capture_default_str();
  cmd->add_option("--prefix-repetition-num-prefixes", o.prefix_repetition.num_prefixes,
                  "shared-prefix: how many prefixes the requests share")
      ->capture_default_str();
  cmd->add_option("--prefix-repetition-output-len", o.prefix_repetition.output_len,
                  "shared-prefix: tokens out per request")
      ->capture_default_str();
  cmd->add_option("--multi-turn", o.multi_turn,
                  "N > 0: conversations of N turns, each turn's message and answer lengths drawn "
                  "from the workload, turn n + 1 sent after turn n's answer with the history "
                  "before it (rates and counts are of conversations; gRPC only)");
  cmd->add_option("--think-time", o.think_time_s, "--multi-turn: seconds between an answer and the next turn")
      ->capture_default_str();
  cmd->add_option("--workload-dir", o.workload_dir, "Where the workload files are")
      ->capture_default_str();
  cmd->add_option("--corpus", o.corpus, "Text file or directory that prompts are cut from")
      ->capture_default_str();
  cmd->add_option("--random-input-len", o.random_input_len, "random workload: N or MIN:MAX tokens")
      ->capture_default_str();
  cmd->add_option("--random-output-len", o.random_output_len,
                  "random workload: N or MIN:MAX tokens")
      ->capture_default_str();
  cmd->add_option("--arrival", o.arrival,
                  "poisson | gamma | constant (default poisson, gamma with --burstiness)");
  cmd->add_option("--burstiness", o.burstiness,
                  "Gamma shape of the inter-arrival gaps: 1 = Poisson, < 1 burstier");
  cmd->add_option("--seed", o.seed, "Seed of lengths, prompts and arrivals")->capture_default_str();
  CLI::Option* slo_ttft = cmd->add_option("--slo-ttft", o.slo_ttft_ms, "TTFT objective in milliseconds");
  CLI::Option* slo_tpot = cmd->add_option("--slo-tpot", o.slo_tpot_ms, "TPOT objective in milliseconds");
  cmd->add_option("--goodput", o.goodput,
                  "vLLM's spelling of the SLOs: ttft:MS tpot:MS (= --slo-ttft MS --slo-tpot MS)")
      ->excludes(slo_ttft)
      ->excludes(slo_tpot);
  cmd->add_option("--max-concurrency", o.max_concurrency,
                  "Requests in flight at once; reaching it is reported")
      ->capture_default_str();
  cmd->add_option("--max-model-len", o.max_model_len,
                  "The served model's context (default: what the server reports)");
  cmd->add_option("--request-timeout", o.request_timeout_s, "Seconds before a request gives up")
      ->capture_default_str();
  cmd->add_option("--prompt-format", o.prompt_format,
                  "ids (exact lengths) | text (decoded prompts, re-tokenized by the server); "
                  "default ids, text on the chat endpoint");
  cmd->add_option("--label", o.label, "Name of the deployment in summaries and plots");
  cmd->add_flag("--no-progress", o.no_progress, "No progress bar");
  cmd->add_option("--fault", o.faults,
                  "ROLE:ACTION:PERIOD, repeatable: every PERIOD of a run, kill (SIGKILL) or freeze "
                  "(SIGSTOP) one live worker of ROLE, e.g. decode:kill:20s (needs --fault-registry, "
                  "--secret-file and the bench on the workers' host)");
  cmd->add_option("--fault-registry", o.fault_registry,
                  "HOST:PORT of the scheduler's internal port (its worker registry), for --fault");
  cmd->add_option("--secret-file", o.secret_file,
                  "The deployment secret's file (`baton serve --secret-file`), for --fault");
}

absl::StatusOr<BenchConfig> MakeConfig(const CommonOptions& o) {
  BenchConfig config;
  config.server = o.server;
  config.openai_url = o.openai_url;
  if (!o.backend.empty() || !o.endpoint.empty()) {
    if (!o.server.empty()) {
      return absl::InvalidArgumentError(
          "--backend and --endpoint name an OpenAI endpoint; --server is Baton's gRPC API");
    }
    ASSIGN_OR_RETURN(config.openai_url, bench::OpenAiUrlOf(o.openai_url, o.backend, o.endpoint));
  }
  bool chat = false;
  if (!config.openai_url.empty() && config.server.empty()) {
    ASSIGN_OR_RETURN(const bench::OpenAiEndpoint endpoint, bench::ParseOpenAiUrl(config.openai_url));
    chat = endpoint.chat;
  }
  config.model_name = o.model_name;
  config.api_key = o.api_key;
  if (!o.tokenizer.empty()) {
    config.tokenizer_json = o.tokenizer;
  } else {
    ASSIGN_OR_RETURN(const std::filesystem::path model_dir, ResolveModelDir(o.model_dir));
    config.tokenizer_json = model_dir / "tokenizer.json";
  }
  config.workload = o.workload;
  if (!o.dataset_name.empty()) {
    ASSIGN_OR_RETURN(config.workload, bench::WorkloadOfDataset(o.dataset_name));
  }
  config.prefix_repetition = o.prefix_repetition;
  config.multi_turn = o.multi_turn;
  config.think_time_s = o.think_time_s;
  config.workload_dir = o.workload_dir;
  config.corpus = o.corpus;
  ASSIGN_OR_RETURN(config.random_input_len, bench::ParseLengthRange(o.random_input_len));
  ASSIGN_OR_RETURN(config.random_output_len, bench::ParseLengthRange(o.random_output_len));
  if (!o.arrival.empty()) {
    ASSIGN_OR_RETURN(config.arrival_kind, bench::ParseArrivalKind(o.arrival));
  } else if (o.burstiness) {
    config.arrival_kind = bench::ArrivalKind::kGamma;
  }
  if (o.burstiness) {
    if (config.arrival_kind != bench::ArrivalKind::kGamma) {
      return absl::InvalidArgumentError("--burstiness applies to --arrival gamma");
    }
    config.burstiness = *o.burstiness;
  }
  config.seed = o.seed;
  if (!o.goodput.empty()) {
    ASSIGN_OR_RETURN(const bench::GoodputSlo slo, bench::ParseGoodput(o.goodput));
    config.slo = bench::Slo{.ttft_s = slo.ttft_ms / 1e3, .tpot_s = slo.tpot_ms / 1e3};
  }
  if (o.slo_ttft_ms.has_value() != o.slo_tpot_ms.has_value()) {
    return absl::InvalidArgumentError("give both --slo-ttft and --slo-tpot");
  }
  if (o.slo_ttft_ms) {
    if (!(*o.slo_ttft_ms > 0) || !(*o.slo_tpot_ms > 0)) {
      return absl::InvalidArgumentError("--slo-ttft and --slo-tpot must be > 0 (milliseconds)");
    }
    config.slo = bench::Slo{.ttft_s = *o.slo_ttft_ms / 1e3, .tpot_s = *o.slo_tpot_ms / 1e3};
  }
  config.max_concurrency = o.max_concurrency;
  config.max_model_len = o.max_model_len;
  if (!(o.request_timeout_s > 0))
    return absl::InvalidArgumentError("--request-timeout must be > 0");
  config.request_timeout = absl::Seconds(o.request_timeout_s);
  if (!o.prompt_format.empty() && o.prompt_format != "ids" && o.prompt_format != "text") {
    return absl::InvalidArgumentError(
        absl::StrCat("--prompt-format '", o.prompt_format, "': expected ids or text"));
  }
  if (chat && o.prompt_format == "ids") {
    return absl::InvalidArgumentError(
        "--prompt-format ids: the chat endpoint takes text (each prompt as one user message)");
  }
  config.prompt_as_text = chat || o.prompt_format == "text";
  config.label = !o.label.empty() ? o.label : !o.server.empty() ? o.server : config.openai_url;
  for (const std::string& text : o.faults) {
    ASSIGN_OR_RETURN(bench::FaultSpec spec, bench::ParseFaultSpec(text));
    config.faults.push_back(spec);
  }
  if (!config.faults.empty()) {
    if (o.fault_registry.empty() || o.secret_file.empty()) {
      return absl::InvalidArgumentError(
          "--fault needs --fault-registry (the scheduler's internal HOST:PORT) and --secret-file");
    }
    config.fault_registry = o.fault_registry;
    absl::StatusOr<runtime::DeploymentSecret> secret = runtime::DeploymentSecret::Load(o.secret_file);
    if (!secret.ok()) {
      return absl::Status(secret.status().code(),
                          absl::StrCat("--secret-file: ", secret.status().message()));
    }
    config.deployment_secret = secret->value();
  }
  return config;
}

absl::StatusOr<std::unique_ptr<BenchSession>> OpenSession(const CommonOptions& o) {
  ASSIGN_OR_RETURN(const BenchConfig config, MakeConfig(o));
  ASSIGN_OR_RETURN(std::unique_ptr<BenchSession> session, BenchSession::Create(config));
  for (const std::string& note : session->notes())
    std::fprintf(stderr, "baton bench: %s\n", note.c_str());
  if (const absl::StatusOr<bench::OpenAiEndpoint> endpoint = bench::ParseOpenAiUrl(config.openai_url);
      endpoint.ok() && endpoint->chat) {
    std::fprintf(stderr, "baton bench: chat endpoint: each prompt goes as one user message, as text; "
                         "the server's prompt adds its chat template's tokens\n");
  }
  return session;
}

// Returns the exit code.
int RunBench(const RunOptions& opts) {
  InstallStopSignalHandlers();
  const std::atomic<bool>* stop = StopFlag();
  absl::StatusOr<std::unique_ptr<BenchSession>> session = OpenSession(opts.common);
  if (!session.ok()) return ReportStatus("baton bench", session.status());
  const int num_requests =
      opts.num_requests.value_or((*session)->is_trace() ? (*session)->num_trace_requests() : 100);
  if (num_requests < 1) {
    return ReportStatus("baton bench",
                        absl::InvalidArgumentError("--num-requests (--num-prompts) must be >= 1"));
  }
  // Default warm-up: the first 10% of the requests.
  const int num_warmup = opts.num_warmup.value_or(num_requests / 10);
  absl::StatusOr<bench::RunOutcome> outcome =
      (*session)->Run({.rate_per_s = opts.rate,
                       .num_requests = num_requests,
                       .num_warmup = num_warmup,
                       .stop = stop,
                       .show_progress = !opts.common.no_progress});
  if (!outcome.ok()) return ReportStatus("baton bench", outcome.status());
  std::fputs(bench::FormatSummary(outcome->summary).c_str(), stdout);
  std::fflush(stdout);
  absl::Status written = absl::OkStatus();
  if (!opts.output.empty()) {
    written = bench::WriteRecordsJsonl(opts.output, outcome->result.records);
    if (written.ok()) std::fprintf(stderr, "baton bench: records in %s\n", opts.output.c_str());
  }
  if (written.ok() && !opts.summary_json.empty()) {
    written = bench::WriteJsonFile(opts.summary_json, bench::SummaryToJson(outcome->summary));
  }
  if (!written.ok()) return ReportStatus("baton bench", written);
  if (outcome->summary.dispatch.interrupted) return kExitInterrupted;
  return outcome->summary.num_completed > 0 ? 0 : 1;
}

std::vector<std::string> FaultStrings(const std::vector<bench::FaultSpec>& faults) {
  std::vector<std::string> strings;
  for (const bench::FaultSpec& spec : faults) strings.push_back(bench::FaultSpecString(spec));
  return strings;
}

nlohmann::json GoodputJson(const GoodputOptions& opts, const BenchSession& session,
                           const bench::GoodputResult& result,
                           const std::vector<nlohmann::json>& runs) {
  const BenchConfig& config = session.config();
  return {{"label", config.label},
          {"workload", config.workload},
          {"slo", {{"ttft_s", config.slo->ttft_s}, {"tpot_s", config.slo->tpot_s}}},
          {"target_attainment", opts.target_attainment},
          {"faults", FaultStrings(config.faults)},
          {"goodput_per_s", result.goodput_per_s},
          {"bracketed", result.bracketed},
          {"converged", result.converged},
          {"rule",
           {{"min_duration_s", opts.min_duration_s},
            {"min_requests", opts.min_requests},
            {"warmup_fraction", opts.warmup_fraction},
            {"rel_tolerance", opts.tolerance}}},
          {"seed", config.seed},
          {"notes", session.notes()},
          {"runs", runs}};
}

int RunGoodput(const GoodputOptions& opts) {
  InstallStopSignalHandlers();
  const std::atomic<bool>* stop = StopFlag();
  if (!opts.common.slo_ttft_ms && opts.common.goodput.empty()) {
    return ReportStatus("baton bench goodput",
                        absl::InvalidArgumentError(
                            "--slo-ttft and --slo-tpot (or --goodput ttft:MS tpot:MS) are required"));
  }
  std::error_code ec;
  std::filesystem::create_directories(opts.output_dir, ec);
  if (ec) {
    return ReportStatus("baton bench goodput",
                        absl::InternalError(absl::StrCat("cannot create ", opts.output_dir)));
  }
  absl::StatusOr<std::unique_ptr<BenchSession>> session = OpenSession(opts.common);
  if (!session.ok()) return ReportStatus("baton bench goodput", session.status());
  const bench::SteadyStateRule rule{.min_duration_s = opts.min_duration_s,
                                    .min_requests = opts.min_requests,
                                    .warmup_fraction = opts.warmup_fraction};
  std::fprintf(stderr,
               "baton bench goodput: each run sends max(%d, rate x %g s) measured requests after "
               "%g%% more as warm-up; target %g%% attainment\n",
               rule.min_requests, rule.min_duration_s, rule.warmup_fraction * 100,
               opts.target_attainment * 100);
  std::vector<nlohmann::json> runs;
  bool interrupted = false;
  const auto attainment_at = [&](double rate) -> absl::StatusOr<double> {
    const bench::RunLength length = bench::RunLengthForRate(rate, rule);
    std::fprintf(stderr, "baton bench goodput: run %d at %.4g req/s (%d requests)\n",
                 static_cast<int>(runs.size()) + 1, rate, length.num_requests);
    ASSIGN_OR_RETURN(bench::RunOutcome outcome,
                     (*session)->Run({.rate_per_s = rate,
                                      .num_requests = length.num_requests,
                                      .num_warmup = length.num_warmup,
                                      .prompt_round = static_cast<int>(runs.size()),
                                      .stop = stop,
                                      .show_progress = !opts.common.no_progress}));
    const std::string file =
        absl::StrFormat("run-%02d-rate-%.4g.jsonl", static_cast<int>(runs.size()) + 1, rate);
    RETURN_IF_ERROR(bench::WriteRecordsJsonl(std::filesystem::path(opts.output_dir) / file,
                                             outcome.result.records));
    runs.push_back({{"rate_per_s", rate},
                    {"attainment", outcome.summary.attainment},
                    {"records", file},
                    {"summary", bench::SummaryToJson(outcome.summary)}});
    std::fprintf(stderr, "baton bench goodput: %.4g req/s -> %.1f%% attainment\n", rate,
                 outcome.summary.attainment * 100);
    if (outcome.summary.dispatch.interrupted) {
      interrupted = true;
      return absl::CancelledError("interrupted");
    }
    if (outcome.summary.num_completed == 0) {
      return absl::UnavailableError(absl::StrCat(
          "no request completed at ", rate,
          " req/s: ", outcome.summary.errors.empty() ? "" : outcome.summary.errors.front()));
    }
    return outcome.summary.attainment;
  };
  absl::StatusOr<bench::GoodputResult> result =
      bench::SearchGoodput(attainment_at, {.initial_rate = opts.initial_rate,
                                           .target_attainment = opts.target_attainment,
                                           .rel_tolerance = opts.tolerance,
                                           .max_rate = opts.max_rate,
                                           .max_runs = opts.max_runs});
  bench::GoodputResult partial;
  for (const nlohmann::json& run : runs) {
    partial.runs.push_back({run["rate_per_s"].get<double>(), run["attainment"].get<double>()});
  }
  const bench::GoodputResult& final_result = result.ok() ? *result : partial;
  const std::filesystem::path json_path = std::filesystem::path(opts.output_dir) / "goodput.json";
  nlohmann::json json = GoodputJson(opts, **session, final_result, runs);
  if (!result.ok()) json["error"] = std::string(result.status().message());
  if (const absl::Status status = bench::WriteJsonFile(json_path, json); !status.ok()) {
    return ReportStatus("baton bench goodput", status);
  }
  if (interrupted) {
    std::fprintf(stderr, "baton bench goodput: interrupted; runs so far in %s\n",
                 json_path.c_str());
    return kExitInterrupted;
  }
  if (!result.ok()) return ReportStatus("baton bench goodput", result.status());
  std::printf("goodput: %.4g req/s at %.0f%% attainment (TTFT <= %g ms, TPOT <= %g ms)%s%s\n",
              result->goodput_per_s, opts.target_attainment * 100,
              (*session)->config().slo->ttft_s * 1e3, (*session)->config().slo->tpot_s * 1e3,
              result->bracketed ? "" : " [not bracketed]",
              result->converged ? "" : " [not converged]");
  for (const bench::RatePoint& point : result->runs) {
    std::printf("  %10.4g req/s  %5.1f%%\n", point.rate_per_s, point.attainment * 100);
  }
  std::printf("runs in %s\n", json_path.c_str());
  return 0;
}

}  // namespace

void RegisterBenchCommand(CLI::App& app, int* exit_code) {
  auto run = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Open-loop load generator: replays a workload against an endpoint, records latencies");
  AddCommonOptions(cmd, run->common);
  cmd->add_option("--rate,--request-rate", run->rate,
                  "Mean requests per second (a trace: rescale it to this rate); --request-rate is "
                  "vLLM's name");
  cmd->add_option("--num-requests,--num-prompts", run->num_requests,
                  "Requests to send, warm-up included (default 100; a trace: all of it); "
                  "--num-prompts is vLLM's name");
  cmd->add_option("--warmup", run->num_warmup,
                  "Leading requests left out of the figures (default: 10% of --num-requests)");
  cmd->add_option("--output", run->output, "Per-request records, JSONL");
  cmd->add_option("--summary-json", run->summary_json, "The summary as JSON");

  auto goodput = std::make_shared<GoodputOptions>();
  CLI::App* search = cmd->add_subcommand(
      "goodput", "The highest rate meeting the SLOs for a target share of requests");
  AddCommonOptions(search, goodput->common);
  search
      ->add_option("--attainment-target", goodput->target_attainment,
                   "Share of requests that must meet both SLOs")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  search->add_option("--initial-rate", goodput->initial_rate, "First rate tried, req/s")
      ->capture_default_str();
  search->add_option("--max-rate", goodput->max_rate, "Stop doubling above this rate")
      ->capture_default_str();
  search
      ->add_option("--min-duration", goodput->min_duration_s,
                   "Seconds of arrivals per run at least (steady state)")
      ->capture_default_str();
  search->add_option("--min-requests", goodput->min_requests, "Measured requests per run at least")
      ->capture_default_str();
  search
      ->add_option("--warmup-fraction", goodput->warmup_fraction,
                   "Warm-up requests per run, as a share of the measured ones")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.99));
  search
      ->add_option("--tolerance", goodput->tolerance,
                   "Stop bisecting when (high - low) / low is below this")
      ->capture_default_str();
  search->add_option("--max-runs", goodput->max_runs, "Runs at most")->capture_default_str();
  search
      ->add_option("--output-dir", goodput->output_dir,
                   "Where goodput.json and each run's records go")
      ->required();

  cmd->callback([run, search, exit_code] {
    if (search->parsed()) return;
    *exit_code = RunBench(*run);
  });
  search->callback([goodput, exit_code] { *exit_code = RunGoodput(*goodput); });
}

}  // namespace baton::cli
