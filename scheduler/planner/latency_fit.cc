#include "scheduler/planner/latency_fit.h"

#include <array>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace baton::scheduler::planner {
namespace {

constexpr int kNumTerms = 3;
using Row = std::array<double, kNumTerms>;

// One sample as the fit sees it: the features whose weighted sum predicts ms.
struct Observation {
  Row x;
  double ms;
};

// A Gram-matrix pivot below this (on columns scaled to unit norm, so pivots are in [0, 1]) means
// the columns are linearly dependent to within rounding: the samples cannot tell the terms apart.
constexpr double kMinPivot = 1e-10;

// Solves the normal equations of min Σ_i ((x_i · θ - y_i) / y_i)² over the terms in `free`
// (the others are held at 0). The rows are divided by y_i (the weights) and each column by its
// norm, so the Gram matrix has a unit diagonal whatever the magnitudes (Σ tokens² is ~1e6 times
// Σ tokens). Returns false when the free columns are dependent.
bool SolveSubset(const std::vector<Observation>& obs, const std::array<bool, kNumTerms>& free,
                 Row* theta) {
  std::array<int, kNumTerms> cols{};
  int n = 0;
  for (int j = 0; j < kNumTerms; ++j) {
    if (free[j]) cols[n++] = j;
  }
  Row scale{};
  for (int k = 0; k < n; ++k) {
    double sum = 0;
    for (const Observation& o : obs) sum += (o.x[cols[k]] / o.ms) * (o.x[cols[k]] / o.ms);
    scale[k] = std::sqrt(sum);
    if (!(scale[k] > 0)) return false;
  }
  // Augmented system [G | r], G = AᵀA and r = Aᵀ1 for A the weighted, scaled rows.
  double m[kNumTerms][kNumTerms + 1] = {};
  for (const Observation& o : obs) {
    Row a{};
    for (int k = 0; k < n; ++k) a[k] = o.x[cols[k]] / o.ms / scale[k];
    for (int r = 0; r < n; ++r) {
      for (int c = 0; c < n; ++c) m[r][c] += a[r] * a[c];
      m[r][n] += a[r];
    }
  }
  // Gaussian elimination with partial pivoting; G is symmetric positive semi-definite.
  for (int p = 0; p < n; ++p) {
    int best = p;
    for (int r = p + 1; r < n; ++r) {
      if (std::abs(m[r][p]) > std::abs(m[best][p])) best = r;
    }
    if (std::abs(m[best][p]) < kMinPivot) return false;
    if (best != p) {
      for (int c = 0; c <= n; ++c) std::swap(m[p][c], m[best][c]);
    }
    for (int r = p + 1; r < n; ++r) {
      const double f = m[r][p] / m[p][p];
      for (int c = p; c <= n; ++c) m[r][c] -= f * m[p][c];
    }
  }
  Row phi{};
  for (int r = n - 1; r >= 0; --r) {
    double v = m[r][n];
    for (int c = r + 1; c < n; ++c) v -= m[r][c] * phi[c];
    phi[r] = v / m[r][r];
  }
  *theta = Row{};
  for (int k = 0; k < n; ++k) (*theta)[cols[k]] = phi[k] / scale[k];
  return true;
}

double Objective(const std::vector<Observation>& obs, const Row& theta) {
  double sum = 0;
  for (const Observation& o : obs) {
    const double predicted = o.x[0] * theta[0] + o.x[1] * theta[1] + o.x[2] * theta[2];
    const double rel = (predicted - o.ms) / o.ms;
    sum += rel * rel;
  }
  return sum;
}

// Non-negative weighted least squares. With three terms, trying every set of free terms is the
// exact answer and as short as an active-set loop: a set qualifies when its unconstrained fit is
// >= 0 everywhere, and the best qualifying set wins. When the full fit is already >= 0 that is
// it; otherwise the negative terms end up fixed at 0 and the rest refitted, as the header says.
absl::StatusOr<Row> FitNonNegative(const std::vector<Observation>& obs, absl::string_view phase) {
  if (obs.size() < kNumTerms) {
    return absl::InvalidArgumentError(
        absl::StrCat(phase, " fit: ", obs.size(), " samples, need at least ", kNumTerms));
  }
  for (size_t i = 0; i < obs.size(); ++i) {
    const Observation& o = obs[i];
    if (!std::isfinite(o.ms) || !(o.ms > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(phase, " fit: sample ", i, " has time ", o.ms, " ms, must be > 0"));
    }
    for (double v : o.x) {
      if (!std::isfinite(v) || v < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(phase, " fit: sample ", i, " has a negative or non-finite size"));
      }
    }
  }
  Row theta{};
  if (!SolveSubset(obs, {true, true, true}, &theta)) {
    return absl::InvalidArgumentError(
        absl::StrCat(phase,
                     " fit: the samples do not determine the three coefficients (too few distinct "
                     "batch shapes)"));
  }
  if (theta[0] >= 0 && theta[1] >= 0 && theta[2] >= 0) return theta;

  Row best{};
  double best_objective = std::numeric_limits<double>::infinity();
  for (int mask = 1; mask < (1 << kNumTerms) - 1; ++mask) {
    const std::array<bool, kNumTerms> free = {(mask & 1) != 0, (mask & 2) != 0, (mask & 4) != 0};
    Row candidate{};
    if (!SolveSubset(obs, free, &candidate)) continue;
    if (candidate[0] < 0 || candidate[1] < 0 || candidate[2] < 0) continue;
    const double objective = Objective(obs, candidate);
    if (objective < best_objective) {
      best_objective = objective;
      best = candidate;
    }
  }
  // A single free term fits c = Σ(x/y) / Σ(x/y)² >= 0, so some set always qualifies.
  return best;
}

std::vector<Observation> Observations(const std::vector<PrefillSample>& samples) {
  std::vector<Observation> obs;
  obs.reserve(samples.size());
  for (const PrefillSample& s : samples) {
    obs.push_back({{1.0, s.sum_tokens, s.sum_tokens_squared}, s.ms});
  }
  return obs;
}

std::vector<Observation> Observations(const std::vector<DecodeSample>& samples) {
  std::vector<Observation> obs;
  obs.reserve(samples.size());
  for (const DecodeSample& s : samples) {
    obs.push_back({{1.0, s.sum_context, static_cast<double>(s.batch_size)}, s.ms});
  }
  return obs;
}

}  // namespace

absl::StatusOr<PrefillCoefficients> FitPrefill(const std::vector<PrefillSample>& samples) {
  absl::StatusOr<Row> theta = FitNonNegative(Observations(samples), "prefill");
  if (!theta.ok()) return theta.status();
  return PrefillCoefficients{.a_ms = (*theta)[0], .b_ms = (*theta)[1], .c_ms = (*theta)[2]};
}

absl::StatusOr<DecodeCoefficients> FitDecode(const std::vector<DecodeSample>& samples) {
  absl::StatusOr<Row> theta = FitNonNegative(Observations(samples), "decode");
  if (!theta.ok()) return theta.status();
  return DecodeCoefficients{.a_ms = (*theta)[0], .b_ms = (*theta)[1], .c_ms = (*theta)[2]};
}

double RelativeRmsError(const PrefillCoefficients& c, const std::vector<PrefillSample>& samples) {
  if (samples.empty()) return 0;
  const Row theta = {c.a_ms, c.b_ms, c.c_ms};
  return std::sqrt(Objective(Observations(samples), theta) / samples.size());
}

double RelativeRmsError(const DecodeCoefficients& c, const std::vector<DecodeSample>& samples) {
  if (samples.empty()) return 0;
  const Row theta = {c.a_ms, c.b_ms, c.c_ms};
  return std::sqrt(Objective(Observations(samples), theta) / samples.size());
}

}  // namespace baton::scheduler::planner
