// Goodput: the highest request rate at which at least a target share of requests (90% by default)
// meets both SLOs. Found by bracketing and bisection over runs at fixed rates:
//   1. Run at initial_rate. If it attains the target, double the rate until a run misses it;
//      otherwise halve it until a run attains it. That brackets the goodput in [lo, hi), lo
//      attaining and hi missing.
//   2. Bisect (arithmetic midpoint) while (hi - lo) / lo > rel_tolerance.
// The answer is lo, the highest rate that a run attained. It is 0 when even min_rate misses, and
// the search stops at max_rate (bracketed = false) when every rate up to it attains.
// The search assumes attainment falls with the rate; run-to-run noise can break that near the
// goodput, which common random numbers (plan.h: the same seed at every rate) reduce.
//
// Steady state (RunLengthForRate): each run sends max(min_requests, rate * min_duration_s)
// measured requests, so that it lasts at least min_duration_s of arrivals, plus
// warmup_fraction of that count sent first and left out of the figures. The defaults (60 s,
// 100 requests, 10% warm-up) keep a run's queues past their fill-up for most of its length.
#pragma once

#include <functional>
#include <vector>

#include "absl/status/statusor.h"

namespace baton::bench {

struct SteadyStateRule {
  double min_duration_s = 60;    // of arrivals, > 0
  int min_requests = 100;        // measured, >= 1
  double warmup_fraction = 0.1;  // of the measured count, in [0, 1)
};

struct RunLength {
  int num_requests = 0;  // including warm-up
  int num_warmup = 0;
};

RunLength RunLengthForRate(double rate_per_s, const SteadyStateRule& rule);

struct GoodputSearchOptions {
  double initial_rate = 1.0;       // requests/s, > 0
  double target_attainment = 0.9;  // in (0, 1]
  double rel_tolerance = 0.05;     // > 0
  double min_rate = 1e-3;          // give up below it (goodput 0)
  double max_rate = 1e4;           // stop doubling above it
  int max_runs = 16;               // >= 2; the search ends (converged = false) after this many runs
};

struct RatePoint {
  double rate_per_s = 0;
  double attainment = 0;
};

struct GoodputResult {
  double goodput_per_s = 0;     // the highest rate that attained the target; 0 if none
  bool bracketed = false;       // a rate that missed the target was found
  bool converged = false;       // the bracket narrowed to rel_tolerance
  std::vector<RatePoint> runs;  // in the order they ran
};

// Returns the search's result; the first error of `attainment_at` (a failed or interrupted run)
// ends the search and is returned. InvalidArgument for bad options.
absl::StatusOr<GoodputResult> SearchGoodput(
    const std::function<absl::StatusOr<double>(double rate_per_s)>& attainment_at,
    const GoodputSearchOptions& options);

}  // namespace baton::bench
