#include "benchmarks/bench/arrivals.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "benchmarks/bench/rng.h"

namespace baton::bench {

absl::string_view ArrivalKindName(ArrivalKind kind) {
  switch (kind) {
    case ArrivalKind::kPoisson:
      return "poisson";
    case ArrivalKind::kGamma:
      return "gamma";
    case ArrivalKind::kConstant:
      return "constant";
  }
  return "unknown";
}

absl::StatusOr<ArrivalKind> ParseArrivalKind(absl::string_view name) {
  for (ArrivalKind kind : {ArrivalKind::kPoisson, ArrivalKind::kGamma, ArrivalKind::kConstant}) {
    if (name == ArrivalKindName(kind)) return kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("arrival process '", name, "': expected poisson, gamma or constant"));
}

absl::Status ValidateArrivalSpec(const ArrivalSpec& spec) {
  if (!std::isfinite(spec.rate_per_s) || spec.rate_per_s <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rate: ", spec.rate_per_s, " requests/s, must be finite and > 0"));
  }
  if (spec.kind == ArrivalKind::kGamma &&
      (!std::isfinite(spec.burstiness) || spec.burstiness <= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("burstiness: ", spec.burstiness, ", must be finite and > 0"));
  }
  return absl::OkStatus();
}

std::string DescribeArrivals(const ArrivalSpec& spec) {
  if (spec.kind == ArrivalKind::kGamma) {
    return absl::StrFormat("gamma (burstiness %g) at %g req/s", spec.burstiness, spec.rate_per_s);
  }
  return absl::StrFormat("%s at %g req/s", ArrivalKindName(spec.kind), spec.rate_per_s);
}

absl::StatusOr<std::vector<double>> GenerateArrivalTimes(const ArrivalSpec& spec, int num_requests,
                                                         uint64_t seed) {
  if (absl::Status status = ValidateArrivalSpec(spec); !status.ok()) return status;
  if (num_requests < 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_requests: ", num_requests, " < 0"));
  }
  Rng rng(seed);
  const double mean_gap_s = 1.0 / spec.rate_per_s;
  std::vector<double> times;
  times.reserve(num_requests);
  double t = 0.0;
  for (int i = 0; i < num_requests; ++i) {
    if (i > 0) {
      switch (spec.kind) {
        case ArrivalKind::kPoisson:
          t += rng.Exponential(mean_gap_s);
          break;
        case ArrivalKind::kGamma:
          t += rng.Gamma(spec.burstiness, mean_gap_s / spec.burstiness);
          break;
        case ArrivalKind::kConstant:
          t = i * mean_gap_s;  // no accumulated rounding
          break;
      }
    }
    times.push_back(t);
  }
  return times;
}

absl::StatusOr<std::vector<double>> RescaleToRate(const std::vector<double>& times,
                                                  double rate_per_s) {
  if (!std::isfinite(rate_per_s) || rate_per_s <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("rate: ", rate_per_s, " must be > 0"));
  }
  if (times.size() < 2 || !(times.back() > times.front())) {
    return absl::InvalidArgumentError(
        "rescaling a trace to a rate needs at least two arrivals at different times");
  }
  const double span_s = times.back() - times.front();
  const double scale = static_cast<double>(times.size() - 1) / span_s / rate_per_s;
  std::vector<double> scaled;
  scaled.reserve(times.size());
  for (double t : times) scaled.push_back((t - times.front()) * scale);
  return scaled;
}

}  // namespace baton::bench
