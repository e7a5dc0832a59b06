// The plan of a run: every request with its arrival time, prompt ids and forced output length, all
// fixed before the first request is sent (open loop), and reproducible from the seed.
//
// Streams of randomness (DeriveSeed): 0 arrival gaps, 1 workload lengths, 2 prompt offsets. With
// the same seed, two runs at different rates send the same requests in the same order, their
// arrival times differing only by the factor between the rates (common random numbers: the points
// of a rate sweep or a goodput search differ in load, not in luck). Only the prompts' text differs
// from one run of a search to the next (PlanOptions::prompt_round): the same text again would find
// a server's prefix cache warm from the run before, a luck no client has.
//
// The first num_warmup requests are warm-up: sent like the others, recorded, and left out of every
// figure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "benchmarks/bench/arrivals.h"
#include "benchmarks/bench/prompt_corpus.h"
#include "benchmarks/bench/trace.h"
#include "benchmarks/bench/workload.h"

namespace baton::bench {

struct PlannedRequest {
  int request_idx = 0;
  double arrival_s = 0;  // offset from the start of the run
  bool warmup = false;
  int input_len = 0;                // == prompt_ids.size()
  int output_len = 0;               // max_tokens, with ignore_eos
  std::vector<int32_t> prompt_ids;  // [input_len]
  std::string prompt_text;  // non-empty: send this text instead of the ids (--prompt-format text)
  // Multi-turn sessions (prefix_workloads.h): turn `turn` of session `session` (-1: not in one). A
  // turn after the first is sent think_s after the session's previous turn ended, its prompt that
  // turn's prompt, its answer, then prompt_ids (the new message); arrival_s is 0 until it is sent,
  // and input_len counts the whole prompt.
  int session = -1;
  int turn = 0;
  double think_s = 0;
};

struct PlanOptions {
  int num_requests = 100;  // > 0
  int num_warmup = 0;      // in [0, num_requests)
  uint64_t seed = 0;
  // Arrivals and lengths only, prompts left empty (`baton plan` simulates the very requests a
  // `baton bench` run of the same seed sends); the corpus is not used.
  bool lengths_only = false;
  // The prompts' text: round r cuts other text from the corpus (the same lengths) than round 0.
  int prompt_round = 0;
};

// InvalidArgument unless num_requests > 0 and 0 <= num_warmup < num_requests.
absl::Status CheckCounts(int num_requests, int num_warmup);

// The prompt stream's seed of a plan (stream 2, then one more per round).
uint64_t PromptSeed(const PlanOptions& options);

// `num_requests` requests drawn from `workload` (already FitToContext'ed), arriving by `arrivals`.
// `corpus` supplies prompts for items without ids; it may be null only if every item has ids.
// InvalidArgument for bad options or arrivals.
absl::StatusOr<std::vector<PlannedRequest>> PlanWorkload(const WorkloadDefinition& workload,
                                                         const ArrivalSpec& arrivals,
                                                         const PlanOptions& options,
                                                         const PromptCorpus* corpus);

struct TracePlanOptions {
  int num_requests = 0;  // the first N entries of the trace; 0: all of them
  int num_warmup = 0;
  uint64_t seed = 0;                 // prompt offsets only
  std::optional<double> rate_per_s;  // rescale the arrival times to this mean rate
  int max_model_len = 0;             // > 0: inputs clipped to max_model_len - output_len
  bool lengths_only = false;         // as PlanOptions::lengths_only
  int prompt_round = 0;              // as PlanOptions::prompt_round (prompts cut from the corpus)
};

struct TracePlan {
  std::vector<PlannedRequest> requests;
  int num_clipped = 0;  // inputs shortened to fit max_model_len
};

// The trace's requests in arrival order. InvalidArgument for bad options, an output_len that leaves
// no room in max_model_len, or a rate with fewer than two distinct arrival times.
absl::StatusOr<TracePlan> PlanTrace(const std::vector<TraceEntry>& trace,
                                    const TracePlanOptions& options, const PromptCorpus* corpus);

}  // namespace baton::bench
