// BenchSession: everything a `baton bench` run needs, set up once — the client for the endpoint,
// the tokenizer, the workload fitted to the served model's context, the prompt corpus — and runs
// at chosen rates. `baton bench` makes one run; `baton bench goodput` makes many, one per rate of
// the search (goodput_search.h), all from the same session and seed.
#pragma once

#include <atomic>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "benchmarks/bench/prefix_workloads.h"
#include "benchmarks/bench/arrivals.h"
#include "benchmarks/bench/client.h"
#include "benchmarks/bench/fault.h"
#include "benchmarks/bench/prompt_corpus.h"
#include "benchmarks/bench/runner.h"
#include "benchmarks/bench/summary.h"
#include "benchmarks/bench/trace.h"
#include "benchmarks/bench/workload.h"
#include "runtime/tokenizer/tokenizer.h"

namespace baton::bench {

struct BenchConfig {
  // Exactly one endpoint.
  std::string server;                    // HOST:PORT of Baton's gRPC API
  std::string openai_url;                // http://HOST:PORT of an OpenAI-compatible server
  std::string model_name;                // OpenAI "model"; empty: the server's first model
  std::string api_key;                   // the server's --api-key; empty: none
  std::filesystem::path tokenizer_json;  // the served model's tokenizer.json
  // "chatbot" | "code" | "summarization" (files in workload_dir) | "random" | "shared-prefix"
  // (prefix_workloads.h, shaped by prefix_repetition) | "trace:FILE".
  std::string workload = "chatbot";
  PrefixRepetitionSpec prefix_repetition;
  // > 0: multi-turn sessions of this many turns over the workload's lengths (prefix_workloads.h);
  // num_requests and the rate count sessions. Needs the gRPC client (the answers' token ids).
  int multi_turn = 0;
  double think_time_s = 1.0;
  std::filesystem::path workload_dir;
  std::filesystem::path corpus = kDefaultCorpusDir;
  LengthRange random_input_len{.min_len = 128, .max_len = 128};
  LengthRange random_output_len{.min_len = 128, .max_len = 128};
  ArrivalKind arrival_kind = ArrivalKind::kPoisson;
  double burstiness = 1.0;
  uint64_t seed = 0;
  int max_model_len = 0;  // 0: the server's (GetModelInfo); required when the server does not say
  int max_concurrency = 512;
  absl::Duration request_timeout = absl::Seconds(600);
  bool prompt_as_text = false;  // send decoded text instead of token ids
  std::string label;            // names the deployment in summaries and plots
  std::optional<Slo> slo;
  // Faults dealt during every run (fault_injector.h), through the scheduler's worker registry at
  // fault_registry (HOST:PORT of its internal port) with the deployment secret.
  std::vector<FaultSpec> faults;
  std::string fault_registry;
  std::string deployment_secret;
};

struct RunSpec {
  std::optional<double> rate_per_s;  // required except for a trace (which then keeps its pace)
  int num_requests = 100;            // including warm-up; a trace: its first N (0: all of it)
  int num_warmup = 0;
  int prompt_round = 0;  // PlanOptions::prompt_round: the run's index in a search
  const std::atomic<bool>* stop = nullptr;
  bool show_progress = false;  // a progress bar on stderr when it is a terminal
};

struct RunOutcome {
  RunResult result;
  RunSummary summary;
};

class BenchSession {
 public:
  // Loads the tokenizer and the workload, reaches the server for its model and context length,
  // fits the workload to it. InvalidArgument for a bad config; NotFound for missing files;
  // Unavailable when the server cannot be reached.
  static absl::StatusOr<std::unique_ptr<BenchSession>> Create(const BenchConfig& config);

  absl::StatusOr<RunOutcome> Run(const RunSpec& spec);

  const BenchConfig& config() const { return config_; }
  bool is_trace() const { return trace_.has_value(); }
  int num_trace_requests() const { return trace_ ? static_cast<int>(trace_->size()) : 0; }
  // One line per fact worth knowing before the figures: model, context fit, workload.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  explicit BenchSession(BenchConfig config) : config_(std::move(config)) {}
  // With --fault: the registry answers, and every faulted role has a live worker this process may
  // signal (on this host, of this user).
  absl::Status CheckFaultTargets();

  BenchConfig config_;
  std::unique_ptr<GenerationClient> client_;
  std::unique_ptr<runtime::Tokenizer> tokenizer_;
  std::unique_ptr<PromptCorpus> corpus_;
  std::optional<WorkloadDefinition> workload_;
  std::optional<std::vector<TraceEntry>> trace_;
  int max_model_len_ = 0;
  std::vector<std::string> notes_;
};

}  // namespace baton::bench
