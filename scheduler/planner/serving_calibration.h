// How much slower the engine's steps ran in a served deployment than `baton plan profile` timed them
// alone (LatencyCoefficients' ServingSlowdown), from one of two sources:
//   - FitSlowdownFromStepTraces: the workers' own step traces (`baton serve --step-trace-dir`,
//     runtime/engine/step_trace.h), any deployment. Every step of an instance of pp 1 gives its
//     time over ForwardMs of its shape (its tp's coefficients), its time running to the next
//     step's start when the engine had work left (what the serving loop spends between steps is
//     serving time too), else to its end; it is a prefill step when it carried
//     prompt tokens, else a decode step, and "shared" when another instance of the run was in a
//     step as it started: the simulator's own classes (simulator.h). Instances of pp > 1 count as
//     neighbours only (their steps overlap in flight: a step's time is not its stages' work).
//   - FitServingSlowdown: the server's timestamps in a served run's records (`baton bench
//     --output`), of a 1 prefill + 1 decode deployment, below.
//
// The run must be a disaggregated deployment of one prefill and one decode instance, tp 1 and pp 1,
// as the records do not say which instance served a request:
//   - prefill: each prompt that had its prefill step to itself (its window [prefill start, first
//     token] overlaps no other prompt's) gives step / PrefillMs(prompt); "shared" when the decode
//     instance was in a step for at least half of that window, else "alone";
//   - decode: each gap between two consecutive tokens of a request after its first decode token is
//     one decode step; it gives gap / DecodeMs(batch, Σ context), the batch and Σ context being those
//     of every request in decode at the gap's midpoint; "shared" when a prefill was running then.
// Each factor is the median of its ratios, so a few slow outliers (a page fault, a preempted
// thread) do not move it. A class with no samples takes the other class's factor (the run could not
// tell them apart), and says so through its count of 0.
#pragma once

#include <span>
#include <vector>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/planner/latency_coefficients.h"
#include "scheduler/planner/step_latency_model.h"

namespace baton::scheduler::planner {

// One completed request as the server timed it; seconds on any one clock.
struct ServedRequest {
  int input_len = 0;
  int num_cached_tokens = 0;   // of them, taken from a prefix cache: the prefill computed the rest
  double prefill_start_s = 0;  // its prompt entered a step
  double prefill_end_s = 0;    // its first token came out
  double decode_start_s = 0;   // its KV arrived on the decode instance
  std::vector<double> token_s;  // when each token was emitted, the first (from prefill) included
};

struct ServingCalibration {
  ServingSlowdown slowdown;
  int prefill_alone_samples = 0;
  int prefill_shared_samples = 0;
  int decode_alone_samples = 0;
  int decode_shared_samples = 0;
};

// One instance's step trace: its layout and its steps (seconds on the host's clock).
struct TracedStep {
  double start_s = 0;
  double end_s = 0;
  MicroBatchShape shape;
  bool busy_after = false;  // the engine had work left when it ended
};
struct InstanceTrace {
  std::string name;  // "colocated 0"
  Parallelism parallelism;
  std::vector<TracedStep> steps;  // in start order
};

// Parses a step trace file's text (step_trace.h's format). InvalidArgument naming the line for
// malformed JSON, a missing field, a step that ends before it starts, or no header.
absl::StatusOr<InstanceTrace> ParseStepTrace(absl::string_view jsonl);

// InvalidArgument when no pp-1 instance has a step, a pp-1 instance's tp has no coefficients, or a
// factor is below 0.5 (see FitServingSlowdown). Samples count steps.
absl::StatusOr<ServingCalibration> FitSlowdownFromStepTraces(std::span<const InstanceTrace> traces,
                                                             const LatencyCoefficients& coefficients);

// InvalidArgument when the records give no prefill sample or no decode sample (too few requests, or
// a colocated run without KV hand-off times), a request's times are out of order, or a factor below
// 0.5 (steps twice as fast as the coefficients: they were fitted elsewhere).
absl::StatusOr<ServingCalibration> FitServingSlowdown(std::span<const ServedRequest> requests,
                                                      const TpCoefficients& tp1);

}  // namespace baton::scheduler::planner
