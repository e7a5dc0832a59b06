// Open-loop arrival processes: when each request of a run is sent, as offsets in seconds from the
// start of the run, decided before the run begins and independent of how the server keeps up.
//
//   kPoisson   exponential gaps with mean 1 / rate (a Gamma process of shape 1).
//   kGamma     Gamma-distributed gaps with shape = burstiness and mean 1 / rate: the squared
//              coefficient of variation of the gaps is 1 / burstiness, so burstiness < 1 is
//              burstier than Poisson and > 1 smoother (vLLM's benchmark_serving uses the same
//              definition).
//   kConstant  gaps of exactly 1 / rate.
// A trace replays its own arrival times (trace.h); RescaleToRate stretches them to another rate.
//
// The first request arrives at 0; request i at the sum of the first i gaps. The same spec, count
// and seed give the same times on every platform (rng.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace baton::bench {

enum class ArrivalKind { kPoisson, kGamma, kConstant };

// "poisson" | "gamma" | "constant".
absl::string_view ArrivalKindName(ArrivalKind kind);
// InvalidArgument naming the accepted values for anything else.
absl::StatusOr<ArrivalKind> ParseArrivalKind(absl::string_view name);

struct ArrivalSpec {
  ArrivalKind kind = ArrivalKind::kPoisson;
  double rate_per_s = 1.0;  // mean requests per second, finite and > 0
  double burstiness = 1.0;  // kGamma only: the Gamma shape, finite and > 0
};

// InvalidArgument naming the field when a value is out of range.
absl::Status ValidateArrivalSpec(const ArrivalSpec& spec);

// "poisson at 2 req/s", "gamma (burstiness 0.5) at 2 req/s".
std::string DescribeArrivals(const ArrivalSpec& spec);

// [num_requests] non-decreasing offsets in seconds, the first 0. InvalidArgument for an invalid
// spec or a negative count.
absl::StatusOr<std::vector<double>> GenerateArrivalTimes(const ArrivalSpec& spec, int num_requests,
                                                         uint64_t seed);

// Scales `times` (non-decreasing, first at its own origin) so that their mean rate,
// (n - 1) / (last - first), becomes rate_per_s, keeping the shape of the gaps; shifts the first to
// 0. InvalidArgument if fewer than two times, the times span zero seconds, or the rate is not > 0.
absl::StatusOr<std::vector<double>> RescaleToRate(const std::vector<double>& times,
                                                  double rate_per_s);

}  // namespace baton::bench
