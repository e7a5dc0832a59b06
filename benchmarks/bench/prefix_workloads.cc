#include "benchmarks/bench/prefix_workloads.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"

namespace baton::bench {
namespace {

// The plan's streams of randomness, as plan.cc's (prompts: PromptSeed).
constexpr uint64_t kArrivalStream = 0;
constexpr uint64_t kLengthStream = 1;

}  // namespace

absl::StatusOr<std::vector<PlannedRequest>> PlanPrefixRepetition(const PrefixRepetitionSpec& spec,
                                                                  const ArrivalSpec& arrivals,
                                                                  const PlanOptions& options,
                                                                  const PromptCorpus& corpus) {
  RETURN_IF_ERROR(CheckCounts(options.num_requests, options.num_warmup));
  for (const auto& [name, value, min] : {std::tuple{"prefix_len", spec.prefix_len, 1},
                                         std::tuple{"suffix_len", spec.suffix_len, 0},
                                         std::tuple{"num_prefixes", spec.num_prefixes, 1},
                                         std::tuple{"output_len", spec.output_len, 1}}) {
    if (value < min) {
      return absl::InvalidArgumentError(absl::StrCat("prefix repetition: ", name, " ", value, " must be >= ", min));
    }
  }
  ASSIGN_OR_RETURN(const std::vector<double> times,
                   GenerateArrivalTimes(arrivals, options.num_requests, DeriveSeed(options.seed, kArrivalStream)));
  Rng prompt_rng(PromptSeed(options));
  Rng pick_rng(DeriveSeed(options.seed, kLengthStream));
  std::vector<std::vector<int32_t>> prefixes;
  for (int k = 0; k < spec.num_prefixes; ++k) prefixes.push_back(corpus.Build(spec.prefix_len, prompt_rng));
  std::vector<PlannedRequest> requests(options.num_requests);
  for (int i = 0; i < options.num_requests; ++i) {
    PlannedRequest& request = requests[i];
    request.request_idx = i;
    request.arrival_s = times[i];
    request.warmup = i < options.num_warmup;
    request.output_len = spec.output_len;
    request.input_len = spec.prefix_len + spec.suffix_len;
    if (options.lengths_only) continue;
    request.prompt_ids = prefixes[pick_rng.UniformInt(0, spec.num_prefixes - 1)];
    const std::vector<int32_t> suffix = corpus.Continue(spec.suffix_len, prompt_rng);
    request.prompt_ids.insert(request.prompt_ids.end(), suffix.begin(), suffix.end());
  }
  return requests;
}

absl::StatusOr<std::vector<PlannedRequest>> PlanMultiTurn(const WorkloadDefinition& workload,
                                                          const MultiTurnSpec& spec,
                                                          const ArrivalSpec& arrivals,
                                                          const PlanOptions& options,
                                                          const PromptCorpus* corpus) {
  RETURN_IF_ERROR(CheckCounts(options.num_requests, options.num_warmup));
  if (corpus == nullptr && !options.lengths_only) {
    return absl::FailedPreconditionError("multi-turn: a prompt corpus is needed");
  }
  if (spec.num_turns < 1 || !(spec.think_s >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("multi-turn: num_turns ", spec.num_turns, " must be >= 1 and think time ",
                                                   spec.think_s, " s >= 0"));
  }
  ASSIGN_OR_RETURN(const std::vector<double> times,
                   GenerateArrivalTimes(arrivals, options.num_requests, DeriveSeed(options.seed, kArrivalStream)));
  Rng length_rng(DeriveSeed(options.seed, kLengthStream));
  Rng prompt_rng(PromptSeed(options));
  std::vector<PlannedRequest> requests;
  for (int s = 0; s < options.num_requests; ++s) {
    const std::vector<WorkloadItem> turns = SampleWorkload(workload, spec.num_turns, length_rng);
    int history = 0;  // tokens of the earlier turns' prompts and answers
    for (int t = 0; t < spec.num_turns; ++t) {
      const int input_len = history + turns[t].input_len;
      if (t > 0 && spec.max_model_len > 0 && input_len + turns[t].output_len > spec.max_model_len) break;
      PlannedRequest& request = requests.emplace_back();
      request.request_idx = static_cast<int>(requests.size()) - 1;
      request.arrival_s = t == 0 ? times[s] : 0;
      request.warmup = s < options.num_warmup;
      request.session = s;
      request.turn = t;
      request.think_s = spec.think_s;
      request.input_len = input_len;
      request.output_len = turns[t].output_len;
      if (!options.lengths_only) {
        request.prompt_ids = t == 0 ? corpus->Build(turns[t].input_len, prompt_rng)
                                    : corpus->Continue(turns[t].input_len, prompt_rng);
      }
      history = input_len + turns[t].output_len;
    }
  }
  return requests;
}

}  // namespace baton::bench
