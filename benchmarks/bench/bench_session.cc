#include "benchmarks/bench/bench_session.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "benchmarks/bench/client_grpc.h"
#include "benchmarks/bench/client_openai.h"
#include "benchmarks/bench/fault_injector.h"
#include "benchmarks/bench/plan.h"
#include "benchmarks/bench/progress_bar.h"
#include "kernels/common/status_macros.h"

namespace baton::bench {
namespace {

absl::StatusOr<std::unique_ptr<GenerationClient>> MakeClient(const BenchConfig& config) {
  if (config.server.empty() == config.openai_url.empty()) {
    return absl::InvalidArgumentError("give exactly one of --server and --openai-url");
  }
  if (!config.server.empty()) {
    ASSIGN_OR_RETURN(std::unique_ptr<GrpcClient> client, GrpcClient::Create(config.server, {.api_key = config.api_key}));
    return std::unique_ptr<GenerationClient>(std::move(client));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<OpenAiClient> client,
                   OpenAiClient::Create(config.openai_url,
                                        {.model = config.model_name, .api_key = config.api_key}));
  return std::unique_ptr<GenerationClient>(std::move(client));
}

}  // namespace

absl::StatusOr<std::unique_ptr<BenchSession>> BenchSession::Create(const BenchConfig& config) {
  auto session = std::unique_ptr<BenchSession>(new BenchSession(config));
  if (config.max_concurrency < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-concurrency: ", config.max_concurrency, " < 1"));
  }
  if (config.multi_turn > 0 && config.prompt_as_text) {
    // A text prompt is the turn's new message alone; the history travels as token ids.
    return absl::InvalidArgumentError(
        "--multi-turn sends each history as token ids: use --prompt-format ids and the completions endpoint");
  }
  ASSIGN_OR_RETURN(session->client_, MakeClient(config));
  ASSIGN_OR_RETURN(session->tokenizer_, runtime::Tokenizer::FromFile(config.tokenizer_json));

  ASSIGN_OR_RETURN(const ModelInfo info, session->client_->GetModelInfo());
  session->max_model_len_ = config.max_model_len > 0 ? config.max_model_len : info.max_model_len;
  if (session->max_model_len_ <= 0) {
    return absl::InvalidArgumentError(
        "the server does not report its context length: give --max-model-len");
  }
  session->notes_.push_back(absl::StrCat("model ", info.model.empty() ? "(unnamed)" : info.model,
                                         ", max_model_len ", session->max_model_len_,
                                         config.max_model_len > 0 ? " (--max-model-len)" : ""));

  absl::string_view workload = config.workload;
  if (absl::ConsumePrefix(&workload, "trace:")) {
    ASSIGN_OR_RETURN(session->trace_, LoadTrace(std::string(workload), session->tokenizer_.get()));
    session->notes_.push_back(
        absl::StrCat("trace ", workload, ": ", session->trace_->size(), " requests"));
  } else if (workload == "shared-prefix") {
    const PrefixRepetitionSpec& p = config.prefix_repetition;
    if (p.prefix_len + p.suffix_len + p.output_len > session->max_model_len_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shared-prefix: prefix ", p.prefix_len, " + suffix ", p.suffix_len, " + output ", p.output_len,
          " tokens exceed max_model_len ", session->max_model_len_));
    }
    session->notes_.push_back(absl::StrCat("workload shared-prefix: ", p.num_prefixes, " prefixes of ",
                                           p.prefix_len, " tokens, each request one of them + ", p.suffix_len,
                                           " tokens of its own, ", p.output_len, " out"));
  } else {
    if (workload == "random") {
      session->workload_ = MakeRandomWorkload(config.random_input_len, config.random_output_len);
    } else {
      ASSIGN_OR_RETURN(const std::filesystem::path file, NamedWorkloadFile(workload, config.workload_dir));
      ASSIGN_OR_RETURN(session->workload_, LoadWorkloadDefinition(file, session->tokenizer_.get()));
    }
    ASSIGN_OR_RETURN(const ContextFitReport fit,
                     FitToContext(*session->workload_, session->max_model_len_));
    std::string note =
        absl::StrCat("workload ", session->workload_->name, ": ", session->workload_->description);
    if (session->workload_->num_filtered > 0) {
      absl::StrAppend(&note, "; ", session->workload_->num_filtered, " of ",
                      session->workload_->num_pool_rows, " rows dropped by its filter");
    }
    session->notes_.push_back(std::move(note));
    session->notes_.push_back(absl::StrCat("context fit: ", fit.ToString()));
  }
  if (config.multi_turn > 0) {
    if (session->trace_ || !session->workload_) {
      return absl::InvalidArgumentError("--multi-turn needs a workload of lengths (chatbot, code, random, ...)");
    }
    session->notes_.push_back(absl::StrCat("multi-turn sessions: ", config.multi_turn, " turns, ",
                                           config.think_time_s, " s think time; rates count sessions"));
  }
  ASSIGN_OR_RETURN(session->corpus_, PromptCorpus::Create(*session->tokenizer_, config.corpus));
  if (!config.faults.empty()) RETURN_IF_ERROR(session->CheckFaultTargets());
  return session;
}

absl::Status BenchSession::CheckFaultTargets() {
  if (config_.fault_registry.empty()) {
    return absl::InvalidArgumentError("--fault needs --fault-registry (the scheduler's internal port)");
  }
  ASSIGN_OR_RETURN(const std::vector<RegisteredWorker> workers,
                   RegistryWorkerLister(config_.fault_registry, config_.deployment_secret)());
  std::vector<std::string> specs;
  for (const FaultSpec& spec : config_.faults) {
    int num_targets = 0;
    for (const RegisteredWorker& worker : workers) {
      if (!worker.alive || worker.role != spec.role) continue;
      // Signal 0: the process exists, is that worker, and may be signalled by this user.
      RETURN_IF_ERROR(SignalLocalWorker(worker, 0));
      ++num_targets;
    }
    if (num_targets == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--fault ", FaultSpecString(spec), ": the deployment has no live ",
          runtime::WorkerRoleName(spec.role), " worker"));
    }
    specs.push_back(absl::StrCat(FaultSpecString(spec), " (", num_targets, " targets)"));
  }
  notes_.push_back(absl::StrCat("faults: ", absl::StrJoin(specs, ", "), " through the registry at ",
                                config_.fault_registry));
  return absl::OkStatus();
}

absl::StatusOr<RunOutcome> BenchSession::Run(const RunSpec& spec) {
  std::vector<PlannedRequest> plan;
  ArrivalSpec arrivals{.kind = config_.arrival_kind, .burstiness = config_.burstiness};
  std::string arrivals_text;
  if (trace_) {
    ASSIGN_OR_RETURN(TracePlan trace_plan, PlanTrace(*trace_,
                                                     {.num_requests = spec.num_requests,
                                                      .num_warmup = spec.num_warmup,
                                                      .seed = config_.seed,
                                                      .rate_per_s = spec.rate_per_s,
                                                      .max_model_len = max_model_len_,
                                                      .prompt_round = spec.prompt_round},
                                                     corpus_.get()));
    plan = std::move(trace_plan.requests);
    arrivals_text = spec.rate_per_s ? absl::StrCat("trace rescaled to ", *spec.rate_per_s, " req/s")
                                    : "trace at its own pace";
    if (trace_plan.num_clipped > 0) {
      absl::StrAppend(&arrivals_text, " (", trace_plan.num_clipped, " inputs clipped to fit)");
    }
  } else {
    if (!spec.rate_per_s) return absl::InvalidArgumentError("--rate (--request-rate) is required");
    arrivals.rate_per_s = *spec.rate_per_s;
    const PlanOptions options{.num_requests = spec.num_requests, .num_warmup = spec.num_warmup,
                              .seed = config_.seed, .prompt_round = spec.prompt_round};
    if (!workload_) {
      ASSIGN_OR_RETURN(plan, PlanPrefixRepetition(config_.prefix_repetition, arrivals, options, *corpus_));
    } else if (config_.multi_turn > 0) {
      ASSIGN_OR_RETURN(plan, PlanMultiTurn(*workload_,
                                           {.num_turns = config_.multi_turn,
                                            .think_s = config_.think_time_s,
                                            .max_model_len = max_model_len_},
                                           arrivals, options, corpus_.get()));
    } else {
      ASSIGN_OR_RETURN(plan, PlanWorkload(*workload_, arrivals, options, corpus_.get()));
    }
    arrivals_text = DescribeArrivals(arrivals);
  }
  if (config_.prompt_as_text) {
    for (PlannedRequest& request : plan) {
      request.prompt_text = tokenizer_->Decode(request.prompt_ids, /*skip_special_tokens=*/true);
    }
  }
  RunProgress progress;
  RunOutcome outcome;
  std::vector<FaultEvent> faults;
  {
    std::optional<ProgressBar> bar;
    if (spec.show_progress) bar.emplace(&progress, static_cast<int>(plan.size()));
    std::optional<FaultInjector> injector;
    if (!config_.faults.empty()) {
      injector.emplace(config_.faults,
                       RegistryWorkerLister(config_.fault_registry, config_.deployment_secret),
                       SignalLocalWorker, config_.seed);
      injector->Start();
    }
    outcome.result = RunOpenLoop(*client_, plan,
                                 {.max_concurrency = config_.max_concurrency,
                                  .request_timeout = config_.request_timeout,
                                  .stop = spec.stop,
                                  .progress = &progress,
                                  .encode_answer = [this](const std::string& text) {
                                    return tokenizer_->Encode(text, /*add_special_tokens=*/false);
                                  }});
    if (injector) faults = injector->Stop();
  }
  outcome.summary = Summarize(outcome.result.records, outcome.result.dispatch,
                              {.label = config_.label,
                               .workload = !workload_ ? config_.workload
                                           : config_.multi_turn > 0
                                               ? absl::StrCat(workload_->name, " x", config_.multi_turn, " turns")
                                               : workload_->name,
                               .arrivals = arrivals_text,
                               .rate_per_s = spec.rate_per_s.value_or(0),
                               .slo = config_.slo});
  outcome.summary.faults = std::move(faults);
  return outcome;
}

}  // namespace baton::bench
