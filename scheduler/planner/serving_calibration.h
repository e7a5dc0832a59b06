// FitServingSlowdown: how much slower the engine's steps ran in a served deployment than `baton plan
// profile` timed them alone (LatencyCoefficients' ServingSlowdown), read off the server's own
// timestamps in a served run's records (`baton bench --output`).
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

#include "absl/status/statusor.h"
#include "scheduler/planner/latency_coefficients.h"

namespace baton::scheduler::planner {

// One completed request as the server timed it; seconds on any one clock.
struct ServedRequest {
  int input_len = 0;
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

// InvalidArgument when the records give no prefill sample or no decode sample (too few requests, or
// a colocated run without KV hand-off times), a request's times are out of order, or a factor below
// 0.5 (steps twice as fast as the coefficients: they were fitted elsewhere).
absl::StatusOr<ServingCalibration> FitServingSlowdown(std::span<const ServedRequest> requests,
                                                      const TpCoefficients& tp1);

}  // namespace baton::scheduler::planner
