// Sampling without sorting the vocabulary, with the exact fixed-point arithmetic of sample.h (so
// the CUDA kernel picks the same token). One pass computes the integer weights; when top-k or top-p is
// on, cheap passes narrow the candidates to the tokens near the max logit that surely contain the
// kept set; top-k is then a selection (nth_element) and top-p a weighted quickselect that finds the
// smallest prefix (in the order "higher logit first, lower index first among equal logits") whose
// weight reaches the target, in expected O(candidates) time. The draw walks the kept tokens in
// ascending index order, as the kernel does.
#include "baton/kernels/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "baton/kernels/sample.h"
#include "kernels/cpu/vec_math.h"

namespace baton::kernels {

namespace {

absl::Status ValidateSampling(std::span<const float> logits, const SamplingOptions& o) {
  if (logits.empty()) return absl::InvalidArgumentError("SampleToken: logits are empty");
  if (absl::Status status = ValidateSamplingOptions(o); !status.ok()) return status;
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
// smallest K whose weight reaches `target`, and returns K (>= 1). Requires 1 <= target <= the total
// weight of order[0, count).
size_t SelectMassPrefix(std::vector<int32_t>& order, size_t count,
                        const std::vector<uint64_t>& weight, uint64_t target, Before before) {
  size_t lo = 0;      // order[0, lo): first in order, total weight mass_before < target
  size_t hi = count;  // order[hi, count): after everything in [lo, hi)
  uint64_t mass_before = 0;
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
    uint64_t mass_greater = 0;
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
  return std::max<size_t>(hi, 1);  // unreachable when target <= the total
}

// Sum of weight[i] over i with logits[i] >= threshold, and their count.
struct MassAbove {
  uint64_t mass = 0;
  size_t count = 0;
};
MassAbove MassAtOrAbove(std::span<const float> logits, const uint64_t* weight, float threshold) {
  MassAbove above;
  for (size_t i = 0; i < logits.size(); ++i) {
    const bool in = logits[i] >= threshold;
    above.mass += in ? weight[i] : 0;
    above.count += in;
  }
  return above;
}

size_t CountAtOrAbove(std::span<const float> logits, float threshold) {
  size_t count = 0;
  for (float x : logits) count += x >= threshold;
  return count;
}

// The first i of `indices` (ascending) whose running weight sum exceeds `target` (< the total).
int32_t DrawAscending(const int32_t* indices, size_t count, const uint64_t* weight,
                      uint64_t target) {
  uint64_t cum = 0;
  for (size_t r = 0; r < count; ++r) {
    cum += weight[indices[r]];
    if (cum > target) return indices[r];
  }
  return indices[count - 1];  // unreachable: target < the total
}

}  // namespace

absl::Status ValidateSamplingOptions(const SamplingOptions& o) {
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
  if (!(o.min_p >= 0 && o.min_p <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SampleToken: min_p = ", o.min_p, " is outside [0, 1]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int32_t> SampleToken(std::span<const float> logits, const SamplingOptions& options,
                                    SamplerRng& rng) {
  if (absl::Status status = ValidateSampling(logits, options); !status.ok()) return status;
  const int32_t argmax = Argmax(logits);
  if (options.temperature == 0) return argmax;
  const float max_logit = logits[argmax];
  if (max_logit == -std::numeric_limits<float>::infinity()) return argmax;  // nothing to weigh

  // Fixed-point weights (sample.h); +inf logits share all the mass.
  const size_t n = logits.size();
  thread_local std::vector<uint64_t> weight;
  thread_local std::vector<int32_t> candidates;
  thread_local std::vector<int32_t> order;
  weight.resize(n);
  const float inv_temperature = 1.0f / options.temperature;
  const bool use_top_k = options.top_k > 0 && static_cast<size_t>(options.top_k) < n;
  const bool use_top_p = options.top_p < 1;
  // min-p comes last and only drops tokens from the kept set (sample.h).
  const uint64_t min_weight = MinPWeight(options.min_p);
  // With top-k only the candidates' weights are ever read (below); otherwise every token's.
  if (!use_top_k) {
    for (size_t i = 0; i < n; ++i) {
      weight[i] = SamplingWeight(logits[i], max_logit, inv_temperature);
    }
  }
  if (!use_top_k && !use_top_p) {
    if (min_weight > 0) {
      for (size_t i = 0; i < n; ++i) weight[i] = weight[i] >= min_weight ? weight[i] : 0;
    }
    const uint64_t total = std::accumulate(weight.begin(), weight.end(), uint64_t{0});
    const uint64_t target = DrawTarget(rng.NextBits24(), total);
    uint64_t cum = 0;
    for (size_t i = 0; i < n; ++i) {
      cum += weight[i];
      if (cum > target) return static_cast<int32_t>(i);
    }
    return argmax;  // unreachable: target < total
  }

  // Candidates: the tokens within `span` temperature-scaled nats of the max, for the smallest
  // span that surely contains the kept set (at least top_k tokens; for top_p alone, at least the
  // nucleus' weight). Real logits are peaked, so this is usually a few hundred tokens.
  const size_t k_needed = use_top_k ? static_cast<size_t>(options.top_k) : 1;
  const uint64_t total = use_top_k ? 0 : std::accumulate(weight.begin(), weight.end(), uint64_t{0});
  const uint64_t nucleus_target = use_top_k ? 0 : TopPTarget(options.top_p, total);
  float threshold = -INFINITY;
  if (!std::isinf(max_logit)) {
    for (float span : {2.0f, 4.0f, 8.0f, 16.0f, 32.0f}) {
      const float candidate = max_logit - span * options.temperature;
      const MassAbove above = use_top_k ? MassAbove{.count = CountAtOrAbove(logits, candidate)}
                                        : MassAtOrAbove(logits, weight.data(), candidate);
      if (above.count >= k_needed && (use_top_k || above.mass >= nucleus_target)) {
        threshold = candidate;
        break;
      }
    }
  }
  candidates.resize(n);
  candidates.resize(internal::IndicesWhereAtLeast(logits.data(), static_cast<int64_t>(n),
                                                  threshold, candidates.data()));
  if (use_top_k) {
    for (int32_t i : candidates) weight[i] = SamplingWeight(logits[i], max_logit, inv_temperature);
  }
  order.assign(candidates.begin(), candidates.end());
  const Before before{logits};
  size_t count = order.size();
  if (use_top_k && k_needed < count) {
    count = k_needed;
    std::nth_element(order.begin(), order.begin() + count, order.end(), before);
  }
  if (use_top_p) {
    // The nucleus is a share of the top-k tokens' weight, or of the whole row's (not of the
    // candidates', which only narrow the search).
    uint64_t target = nucleus_target;
    if (use_top_k) {
      uint64_t top_k_total = 0;
      for (size_t r = 0; r < count; ++r) top_k_total += weight[order[r]];
      target = TopPTarget(options.top_p, top_k_total);
    }
    count = SelectMassPrefix(order, count, weight, target, before);
  }
  // The kept set is every token up to its last member in `before` order; walk it by index.
  const int32_t last = *std::max_element(order.begin(), order.begin() + count, before);
  size_t num_kept = 0;
  uint64_t kept_total = 0;
  for (int32_t i : candidates) {
    if ((i == last || before(i, last)) && weight[i] >= min_weight) {
      candidates[num_kept++] = i;
      kept_total += weight[i];
    }
  }
  return DrawAscending(candidates.data(), num_kept, weight.data(),
                       DrawTarget(rng.NextBits24(), kept_total));
}

std::vector<TokenLogprob> TopLogprobs(std::span<const float> logits, int k, int32_t sampled) {
  const size_t count = k <= 0 ? 0 : std::min(logits.size(), static_cast<size_t>(k));
  if (logits.empty()) return {};
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
              .logprob = static_cast<float>(double{logits[order[r]]} - log_sum),
              .rank = static_cast<int32_t>(r + 1)};
  }
  const bool sampled_in_range = sampled >= 0 && static_cast<size_t>(sampled) < logits.size();
  if (sampled_in_range && std::none_of(out.begin(), out.end(),
                                       [sampled](const TokenLogprob& lp) { return lp.token_id == sampled; })) {
    const float own = logits[sampled];
    const auto above = std::count_if(logits.begin(), logits.end(), [own](float x) { return x > own; });
    out.push_back({.token_id = sampled,
                   .logprob = static_cast<float>(double{own} - log_sum),
                   .rank = static_cast<int32_t>(above + 1)});
  }
  return out;
}

}  // namespace baton::kernels
