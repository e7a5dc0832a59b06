// Fitting LatencyCoefficients to measured step times: least squares on relative error, so a 5 ms
// step and a 500 ms step weigh the same (a plain least-squares fit would match the long prefills
// and miss the short decode steps that TPOT is made of).
//
// Each phase is fitted on its own samples: minimise Σ ((prediction - measured) / measured)² over
// the coefficients, a weighted linear least squares (weights 1 / measured²), solved by the normal
// equations. Coefficients are constrained to be >= 0 (a negative per-token cost is noise): a
// coefficient that comes out negative is fixed at 0 and the rest refitted.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/planner/latency_coefficients.h"

namespace baton::scheduler::planner {

struct PrefillSample {
  double sum_tokens = 0;
  double sum_tokens_squared = 0;
  double ms = 0;  // measured step time, > 0
};

struct DecodeSample {
  int batch_size = 0;
  double sum_context = 0;
  double ms = 0;  // measured step time, > 0
};

// InvalidArgument when fewer than 3 samples, a sample's time is not > 0, or the samples do not
// determine the coefficients (e.g. every batch the same shape).
absl::StatusOr<PrefillCoefficients> FitPrefill(const std::vector<PrefillSample>& samples);
absl::StatusOr<DecodeCoefficients> FitDecode(const std::vector<DecodeSample>& samples);

// The root-mean-square relative error of the coefficients on the samples (0.05 = 5%).
double RelativeRmsError(const PrefillCoefficients& c, const std::vector<PrefillSample>& samples);
double RelativeRmsError(const DecodeCoefficients& c, const std::vector<DecodeSample>& samples);

}  // namespace baton::scheduler::planner
