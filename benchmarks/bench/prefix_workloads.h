// Workloads whose prompts repeat prefixes, the ones a prefix cache serves (issue 38):
//   - prefix repetition (vLLM's `prefix_repetition` dataset): num_prefixes shared prefixes of
//     prefix_len tokens (system prompts, few-shot examples, a document), each request one of them,
//     drawn uniformly, then a suffix of its own (its question), exactly output_len tokens out;
//   - multi-turn sessions: conversations of num_turns turns, each turn's new message and answer
//     lengths drawn from a workload's pool (the chatbot workload's ShareGPT lengths). Turn n + 1's
//     prompt is turn n's prompt, its answer and the new message, sent think_s after turn n's answer
//     is complete (runner.h runs a session's turns in order); a session ends early where the next
//     turn would not fit max_model_len. Sessions arrive by the arrival process; num_requests counts
//     sessions, and each turn is a request in the records and figures.
// Prompts are corpus text (prompt_corpus.h): a prefix or a session's first message starts with the
// tokenizer's special prefix (BOS), the rest continue without it. Reproducible from the seed.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "benchmarks/bench/arrivals.h"
#include "benchmarks/bench/plan.h"
#include "benchmarks/bench/prompt_corpus.h"
#include "benchmarks/bench/workload.h"

namespace baton::bench {

struct PrefixRepetitionSpec {  // vLLM's --prefix-repetition-* defaults
  int prefix_len = 256;
  int suffix_len = 256;
  int num_prefixes = 10;
  int output_len = 128;
};

struct MultiTurnSpec {
  int num_turns = 4;       // >= 1
  double think_s = 1.0;    // a user's pause between an answer and the next message, >= 0
  int max_model_len = 0;   // > 0: sessions stop before a turn that would not fit
};

// InvalidArgument naming the field for a length < 1 (suffix_len 0 is allowed) or no prefixes.
absl::StatusOr<std::vector<PlannedRequest>> PlanPrefixRepetition(const PrefixRepetitionSpec& spec,
                                                                  const ArrivalSpec& arrivals,
                                                                  const PlanOptions& options,
                                                                  const PromptCorpus& corpus);

// `workload` (FitToContext'ed) gives each turn's (message, answer) lengths. Requests in session
// order, each session's turns together; turn 0 carries the session's arrival.
// `corpus` may be null with options.lengths_only (`baton plan`).
absl::StatusOr<std::vector<PlannedRequest>> PlanMultiTurn(const WorkloadDefinition& workload,
                                                          const MultiTurnSpec& spec,
                                                          const ArrivalSpec& arrivals,
                                                          const PlanOptions& options,
                                                          const PromptCorpus* corpus);

}  // namespace baton::bench
