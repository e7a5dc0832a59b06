#include "benchmarks/bench/plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"

namespace baton::bench {
namespace {

constexpr uint64_t kArrivalStream = 0;
constexpr uint64_t kLengthStream = 1;
constexpr uint64_t kPromptStream = 2;

}  // namespace

absl::Status CheckCounts(int num_requests, int num_warmup) {
  if (num_requests <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_requests: ", num_requests, ", must be > 0"));
  }
  if (num_warmup < 0 || num_warmup >= num_requests) {
    return absl::InvalidArgumentError(absl::StrCat(
        "warm-up: ", num_warmup, " requests, must be in [0, num_requests = ", num_requests, ")"));
  }
  return absl::OkStatus();
}

namespace {

// Fills in the prompt of an item without ids.
absl::Status SetPrompt(const WorkloadItem& item, const PromptCorpus* corpus, bool lengths_only,
                       Rng& rng, PlannedRequest& request) {
  request.input_len = item.input_len;
  request.output_len = item.output_len;
  if (lengths_only) return absl::OkStatus();
  if (!item.prompt_ids.empty()) {
    request.prompt_ids.assign(
        item.prompt_ids.begin(),
        item.prompt_ids.begin() + std::min<size_t>(item.input_len, item.prompt_ids.size()));
    request.input_len = static_cast<int>(request.prompt_ids.size());
    return absl::OkStatus();
  }
  if (corpus == nullptr) return absl::FailedPreconditionError("a prompt corpus is needed");
  request.prompt_ids = corpus->Build(item.input_len, rng);
  return absl::OkStatus();
}

}  // namespace

uint64_t PromptSeed(const PlanOptions& options) {
  return DeriveSeed(options.seed, kPromptStream + 16 * static_cast<uint64_t>(options.prompt_round));
}

absl::StatusOr<std::vector<PlannedRequest>> PlanWorkload(const WorkloadDefinition& workload,
                                                         const ArrivalSpec& arrivals,
                                                         const PlanOptions& options,
                                                         const PromptCorpus* corpus) {
  RETURN_IF_ERROR(CheckCounts(options.num_requests, options.num_warmup));
  ASSIGN_OR_RETURN(const std::vector<double> times,
                   GenerateArrivalTimes(arrivals, options.num_requests,
                                        DeriveSeed(options.seed, kArrivalStream)));
  Rng length_rng(DeriveSeed(options.seed, kLengthStream));
  Rng prompt_rng(PromptSeed(options));
  const std::vector<WorkloadItem> items =
      SampleWorkload(workload, options.num_requests, length_rng);
  std::vector<PlannedRequest> requests(options.num_requests);
  for (int i = 0; i < options.num_requests; ++i) {
    PlannedRequest& request = requests[i];
    request.request_idx = i;
    request.arrival_s = times[i];
    request.warmup = i < options.num_warmup;
    RETURN_IF_ERROR(SetPrompt(items[i], corpus, options.lengths_only, prompt_rng, request));
  }
  return requests;
}

absl::StatusOr<TracePlan> PlanTrace(const std::vector<TraceEntry>& trace,
                                    const TracePlanOptions& options, const PromptCorpus* corpus) {
  const int num_requests =
      options.num_requests == 0
          ? static_cast<int>(trace.size())
          : std::min<int>(options.num_requests, static_cast<int>(trace.size()));
  RETURN_IF_ERROR(CheckCounts(num_requests, options.num_warmup));
  std::vector<double> times;
  for (int i = 0; i < num_requests; ++i) times.push_back(trace[i].arrival_s);
  if (options.rate_per_s) {
    ASSIGN_OR_RETURN(times, RescaleToRate(times, *options.rate_per_s));
  }
  Rng prompt_rng(PromptSeed({.seed = options.seed, .prompt_round = options.prompt_round}));
  TracePlan plan;
  plan.requests.resize(num_requests);
  for (int i = 0; i < num_requests; ++i) {
    WorkloadItem item = trace[i].item;
    if (options.max_model_len > 0) {
      if (item.output_len >= options.max_model_len) {
        return absl::InvalidArgumentError(
            absl::StrCat("trace request ", i, ": output_len ", item.output_len,
                         " leaves no room in max_model_len ", options.max_model_len));
      }
      if (item.input_len + item.output_len > options.max_model_len) {
        item.input_len = options.max_model_len - item.output_len;
        ++plan.num_clipped;
      }
    }
    PlannedRequest& request = plan.requests[i];
    request.request_idx = i;
    request.arrival_s = times[i];
    request.warmup = i < options.num_warmup;
    RETURN_IF_ERROR(SetPrompt(item, corpus, options.lengths_only, prompt_rng, request));
  }
  return plan;
}

}  // namespace baton::bench
