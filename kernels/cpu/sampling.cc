// Sampling without sorting the vocabulary. Vectorized passes compute the weights and narrow the
// candidates to the tokens near the max logit that surely contain the kept set; top-k is then a
// selection (nth_element) and top-p a weighted quickselect that finds the smallest prefix (in the
// order "higher logit first, lower index first among equal logits") whose mass reaches top_p, in
// expected O(candidates) time. The draw walks the kept tokens in whatever order the selection left
// them: the distribution is the same, and the order is a deterministic function of the inputs.
#include "baton/kernels/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/vec_math.h"

namespace baton::kernels {

namespace {

absl::Status ValidateSampling(std::span<const float> logits, const SamplingOptions& o) {
  if (logits.empty()) return absl::InvalidArgumentError("SampleToken: logits are empty");
  if (!(o.temperature >= 0) || std::isinf(o.temperature)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SampleToken: temperature = ", o.temperature, " must be finite and >= 0"));
  }
  if (o.top_k < 0) {
    return absl::InvalidArgumentError(absl::StrCat("SampleToken: top_k = ", o.top_k, " < 0"));
  }
  if (!(o.top_p > 0 && o.top_p <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SampleToken: top_p = ", o.top_p, " is outside (0, 1]"));
  }
  // Count first (a loop without early exit vectorizes), find the index only on failure.
  size_t num_nan = 0;
  for (float x : logits) num_nan += x != x;
  if (num_nan > 0) {
    const size_t i = std::find_if(logits.begin(), logits.end(),
                                  [](float x) { return std::isnan(x); }) - logits.begin();
    return absl::InvalidArgumentError(absl::StrCat("SampleToken: logit ", i, " is NaN"));
  }
  return absl::OkStatus();
}

// The first index of the largest logit. No NaN allowed.
int32_t Argmax(std::span<const float> logits) {
  const float max_logit = internal::Max(logits.data(), static_cast<int64_t>(logits.size()));
  return static_cast<int32_t>(std::find(logits.begin(), logits.end(), max_logit) - logits.begin());
}

// The strict total order of the spec: higher logit first, lower index first among equal logits.
struct Before {
  std::span<const float> logits;
  bool operator()(int32_t a, int32_t b) const {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  }
};

// Reorders order[0, count) so that its first K entries are the K first in `before` order, for the
// smallest K whose weight reaches `target`, and returns K (>= 1). Requires target <= the total
// weight of order[0, count), up to rounding (then returns count).
size_t SelectMassPrefix(std::vector<int32_t>& order, size_t count, const std::vector<float>& weight,
                        double target, Before before) {
  size_t lo = 0;      // order[0, lo): first in order, total weight mass_before < target
  size_t hi = count;  // order[hi, count): after everything in [lo, hi)
  double mass_before = 0;
  while (lo < hi) {
    // Median-of-three pivot, moved to order[lo].
    const size_t mid = lo + (hi - lo) / 2;
    size_t candidates[3] = {lo, mid, hi - 1};
    std::sort(candidates, candidates + 3,
              [&](size_t x, size_t y) { return before(order[x], order[y]); });
    std::swap(order[lo], order[candidates[1]]);
    const int32_t pivot = order[lo];
    const auto split = std::partition(order.begin() + lo + 1, order.begin() + hi,
                                      [&](int32_t x) { return before(x, pivot); });
    // order[lo + 1, m + 1) precede the pivot; put the pivot at m.
    const size_t m = static_cast<size_t>(split - order.begin()) - 1;
    std::swap(order[lo], order[m]);
    double mass_greater = 0;
    for (size_t r = lo; r < m; ++r) mass_greater += weight[order[r]];
    if (mass_before + mass_greater >= target && m > lo) {
      hi = m;
    } else if (mass_before + mass_greater + weight[pivot] >= target) {
      return m + 1;
    } else {
      mass_before += mass_greater + weight[pivot];
      lo = m + 1;
    }
  }
  return std::max<size_t>(hi, 1);
}

// Sum of weight[i] over i with logits[i] >= threshold, and their count.
struct MassAbove {
  double mass = 0;
  size_t count = 0;
};
MassAbove MassAtOrAbove(std::span<const float> logits, const float* weight, float threshold) {
  int64_t count = 0;
  const double mass = internal::SumWhereAtLeast(logits.data(), weight,
                                                static_cast<int64_t>(logits.size()), threshold,
                                                &count);
  return {.mass = mass, .count = static_cast<size_t>(count)};
}

// Draws an index in [0, n) with probability weight[i] / sum, for u uniform in [0, 1).
int32_t DrawFromAll(const float* weight, size_t n, double u) {
  constexpr size_t kChunk = 256;
  thread_local std::vector<double> chunk_mass;
  chunk_mass.assign((n + kChunk - 1) / kChunk, 0.0);
  double total = 0;
  for (size_t c = 0; c < chunk_mass.size(); ++c) {
    float mass = 0;
    for (size_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) mass += weight[i];
    chunk_mass[c] = mass;
    total += mass;
  }
  const double target = u * total;
  double cum = 0;
  size_t last_nonzero = 0;
  for (size_t c = 0; c < chunk_mass.size(); ++c) {
    if (chunk_mass[c] <= 0) continue;
    last_nonzero = c;
    if (target < cum + chunk_mass[c]) {
      for (size_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) {
        cum += weight[i];
        if (target < cum && weight[i] > 0) return static_cast<int32_t>(i);
      }
      break;  // rounding: fall through to the last nonzero weight of this chunk
    }
    cum += chunk_mass[c];
  }
  for (size_t i = std::min(n, (last_nonzero + 1) * kChunk); i-- > last_nonzero * kChunk;) {
    if (weight[i] > 0) return static_cast<int32_t>(i);
  }
  return 0;
}

}  // namespace

absl::StatusOr<int32_t> SampleToken(std::span<const float> logits, const SamplingOptions& options,
                                    SamplerRng& rng) {
  if (absl::Status status = ValidateSampling(logits, options); !status.ok()) return status;
  const int32_t argmax = Argmax(logits);
  if (options.temperature == 0) return argmax;
  const float max_logit = logits[argmax];
  if (max_logit == -std::numeric_limits<float>::infinity()) return argmax;  // nothing to weigh

  // Unnormalized probabilities relative to the max logit; +inf logits share all the mass.
  const size_t n = logits.size();
  thread_local std::vector<float> weight;
  thread_local std::vector<int32_t> order;
  weight.resize(n);
  const bool infinite = std::isinf(max_logit);
  if (infinite) {
    for (size_t i = 0; i < n; ++i) weight[i] = logits[i] == max_logit ? 1.0f : 0.0f;
  } else {
    internal::ExpScaled(logits.data(), weight.data(), static_cast<int64_t>(n), max_logit,
                        1.0f / options.temperature);
  }
  const bool use_top_k = options.top_k > 0 && static_cast<size_t>(options.top_k) < n;
  const bool use_top_p = options.top_p < 1;
  if (!use_top_k && !use_top_p) return DrawFromAll(weight.data(), n, rng.NextUniform());

  // Candidates: the tokens within `span` temperature-scaled nats of the max, for the smallest
  // span that surely contains the kept set (at least top_k tokens; for top_p alone, at least the
  // nucleus' mass). Real logits are peaked, so this is usually a few hundred tokens.
  const size_t k_needed = use_top_k ? static_cast<size_t>(options.top_k) : 1;
  const double total = use_top_k ? 0 : MassAtOrAbove(logits, weight.data(), -INFINITY).mass;
  float threshold = -INFINITY;
  if (!infinite) {
    for (float span : {2.0f, 4.0f, 8.0f, 16.0f, 32.0f}) {
      const float candidate = max_logit - span * options.temperature;
      const MassAbove above = MassAtOrAbove(logits, weight.data(), candidate);
      if (above.count >= k_needed && (use_top_k || above.mass >= double{options.top_p} * total)) {
        threshold = candidate;
        break;
      }
    }
  }
  order.resize(n);
  order.resize(internal::IndicesWhereAtLeast(logits.data(), static_cast<int64_t>(n), threshold,
                                             order.data()));
  const Before before{logits};
  size_t count = order.size();
  if (use_top_k && k_needed < count) {
    count = k_needed;
    std::nth_element(order.begin(), order.begin() + count, order.end(), before);
  }
  if (use_top_p) {
    double kept_total = total;
    if (use_top_k) {
      kept_total = 0;
      for (size_t r = 0; r < count; ++r) kept_total += weight[order[r]];
    }
    count = SelectMassPrefix(order, count, weight, double{options.top_p} * kept_total, before);
  }
  double kept_total = 0;
  for (size_t r = 0; r < count; ++r) kept_total += weight[order[r]];
  const double u = double{rng.NextUniform()} * kept_total;
  double cum = 0;
  int32_t last_nonzero = order[0];
  for (size_t r = 0; r < count; ++r) {
    const float w = weight[order[r]];
    if (w <= 0) continue;
    cum += w;
    last_nonzero = order[r];
    if (u < cum) return order[r];
  }
  return last_nonzero;  // u rounded up to the total
}

std::vector<TokenLogprob> TopLogprobs(std::span<const float> logits, int k) {
  const size_t count = k <= 0 ? 0 : std::min(logits.size(), static_cast<size_t>(k));
  if (count == 0) return {};
  float max_logit = -std::numeric_limits<float>::infinity();
  for (float x : logits) max_logit = std::max(max_logit, x);
  double sum = 0;
  for (float x : logits) sum += std::exp(double{x} - max_logit);
  const double log_sum = std::log(sum) + max_logit;
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const Before before{logits};
  if (count < order.size()) std::nth_element(order.begin(), order.begin() + count, order.end(), before);
  std::sort(order.begin(), order.begin() + count, before);
  std::vector<TokenLogprob> out(count);
  for (size_t r = 0; r < count; ++r) {
    out[r] = {.token_id = order[r],
              .logprob = static_cast<float>(double{logits[order[r]]} - log_sum)};
  }
  return out;
}

}  // namespace baton::kernels
