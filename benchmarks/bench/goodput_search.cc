#include "benchmarks/bench/goodput_search.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"

namespace baton::bench {

RunLength RunLengthForRate(double rate_per_s, const SteadyStateRule& rule) {
  const int measured =
      std::max(rule.min_requests, static_cast<int>(std::ceil(rate_per_s * rule.min_duration_s)));
  const int warmup = static_cast<int>(std::ceil(rule.warmup_fraction * measured));
  return {.num_requests = measured + warmup, .num_warmup = warmup};
}

absl::StatusOr<GoodputResult> SearchGoodput(
    const std::function<absl::StatusOr<double>(double rate_per_s)>& attainment_at,
    const GoodputSearchOptions& options) {
  if (!(options.initial_rate > 0) || !(options.min_rate > 0) ||
      !(options.max_rate >= options.min_rate)) {
    return absl::InvalidArgumentError(
        "goodput search: need 0 < min_rate <= max_rate, initial_rate > 0");
  }
  if (!(options.target_attainment > 0 && options.target_attainment <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("target attainment ", options.target_attainment, " not in (0, 1]"));
  }
  if (!(options.rel_tolerance > 0) || options.max_runs < 2) {
    return absl::InvalidArgumentError("goodput search: need rel_tolerance > 0 and max_runs >= 2");
  }
  GoodputResult result;
  const auto run = [&](double rate) -> absl::StatusOr<bool> {
    ASSIGN_OR_RETURN(const double attainment, attainment_at(rate));
    result.runs.push_back({.rate_per_s = rate, .attainment = attainment});
    return attainment >= options.target_attainment;
  };
  const auto budget_left = [&] { return static_cast<int>(result.runs.size()) < options.max_runs; };

  double rate = std::clamp(options.initial_rate, options.min_rate, options.max_rate);
  double lo = 0;  // highest attaining rate so far (0: none)
  double hi = 0;  // lowest missing rate so far (0: none)
  ASSIGN_OR_RETURN(bool attained, run(rate));
  if (attained) {
    lo = rate;
    while (budget_left() && rate < options.max_rate) {
      rate = std::min(rate * 2, options.max_rate);
      ASSIGN_OR_RETURN(attained, run(rate));
      if (!attained) {
        hi = rate;
        break;
      }
      lo = rate;
    }
  } else {
    hi = rate;
    while (budget_left() && rate > options.min_rate) {
      rate = std::max(rate / 2, options.min_rate);
      ASSIGN_OR_RETURN(attained, run(rate));
      if (attained) {
        lo = rate;
        break;
      }
      hi = rate;
    }
  }
  result.bracketed = lo > 0 && hi > 0;
  if (result.bracketed) {
    while ((hi - lo) / lo > options.rel_tolerance && budget_left()) {
      const double mid = (lo + hi) / 2;
      ASSIGN_OR_RETURN(attained, run(mid));
      (attained ? lo : hi) = mid;
    }
    result.converged = (hi - lo) / lo <= options.rel_tolerance;
  }
  result.goodput_per_s = lo;
  return result;
}

}  // namespace baton::bench
