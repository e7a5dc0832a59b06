#include "scheduler/global/latency_model.h"

#include <algorithm>
#include <utility>

#include "kernels/common/check.h"

namespace baton::scheduler {
namespace {

double SecondsBetween(int64_t start_us, int64_t end_us) {
  return static_cast<double>(end_us - start_us) * 1e-6;
}

}  // namespace

double DecodeStepFit::StepMs(int batch_size) const {
  return std::max(0.0, intercept_ms + slope_ms * batch_size);
}

LatencyModel::LatencyModel(LatencyModelOptions options) : options_(std::move(options)) {
  BATON_CHECK(options_.prefill_alpha > 0 && options_.prefill_alpha <= 1);
  BATON_CHECK(options_.decode_window >= 1);
  BATON_CHECK(options_.max_age > absl::ZeroDuration());
  BATON_CHECK(options_.now != nullptr);
}

void LatencyModel::ObservePrefill(const std::string& instance, int64_t num_tokens, int64_t start_us,
                                  int64_t end_us) {
  if (num_tokens <= 0 || end_us <= start_us) return;
  const absl::Time now = options_.now();
  absl::MutexLock lock(&mu_);
  PrefillState& state = instances_[instance].prefill;
  if (state.num_samples > 0 && Expired(state.last_observed, now)) state = PrefillState{};
  state.last_observed = now;
  if (state.num_samples > 0 && start_us == state.latest_start_us) {
    // Another request of the latest sample's engine step.
    state.latest_num_tokens += num_tokens;
    state.latest_end_us = std::max(state.latest_end_us, end_us);
    return;
  }
  if (state.num_samples > 0) {
    const double alpha = options_.prefill_alpha;
    const double latest_tokens = static_cast<double>(state.latest_num_tokens);
    const double latest_seconds = SecondsBetween(state.latest_start_us, state.latest_end_us);
    if (state.num_samples == 1) {
      state.ewma_tokens_before = latest_tokens;
      state.ewma_seconds_before = latest_seconds;
    } else {
      state.ewma_tokens_before = (1 - alpha) * state.ewma_tokens_before + alpha * latest_tokens;
      state.ewma_seconds_before = (1 - alpha) * state.ewma_seconds_before + alpha * latest_seconds;
    }
  }
  ++state.num_samples;
  state.latest_start_us = start_us;
  state.latest_end_us = end_us;
  state.latest_num_tokens = num_tokens;
}

void LatencyModel::ObserveDecodeStep(const std::string& instance, int batch_size, int64_t gap_us) {
  if (batch_size < 1 || gap_us <= 0) return;
  const absl::Time now = options_.now();
  absl::MutexLock lock(&mu_);
  DecodeState& state = instances_[instance].decode;
  if (!state.samples.empty() && Expired(state.last_observed, now)) state.samples.clear();
  state.last_observed = now;
  state.samples.push_back({batch_size, static_cast<double>(gap_us) * 1e-3});
  while (static_cast<int>(state.samples.size()) > options_.decode_window) state.samples.pop_front();
}

std::optional<double> LatencyModel::TokensPerSecond(const PrefillState& state,
                                                    absl::Time now) const {
  if (state.num_samples == 0 || Expired(state.last_observed, now)) return std::nullopt;
  const double latest_tokens = static_cast<double>(state.latest_num_tokens);
  const double latest_seconds = SecondsBetween(state.latest_start_us, state.latest_end_us);
  if (state.num_samples == 1) return latest_tokens / latest_seconds;
  const double alpha = options_.prefill_alpha;
  const double tokens = (1 - alpha) * state.ewma_tokens_before + alpha * latest_tokens;
  const double seconds = (1 - alpha) * state.ewma_seconds_before + alpha * latest_seconds;
  return tokens / seconds;
}

std::optional<DecodeStepFit> LatencyModel::Fit(const DecodeState& state, absl::Time now) const {
  const std::deque<DecodeSample>& samples = state.samples;
  if (samples.empty() || Expired(state.last_observed, now)) return std::nullopt;
  const double n = static_cast<double>(samples.size());
  double mean_batch = 0, mean_gap = 0;
  for (const DecodeSample& s : samples) {
    mean_batch += s.batch_size;
    mean_gap += s.gap_ms;
  }
  mean_batch /= n;
  mean_gap /= n;
  double sxx = 0, sxy = 0;
  for (const DecodeSample& s : samples) {
    const double dx = s.batch_size - mean_batch;
    sxx += dx * dx;
    sxy += dx * (s.gap_ms - mean_gap);
  }
  DecodeStepFit fit{.intercept_ms = mean_gap, .slope_ms = 0,
                    .num_observations = static_cast<int>(samples.size())};
  if (sxx > 0 && sxy > 0) {
    fit.slope_ms = sxy / sxx;
    fit.intercept_ms = mean_gap - fit.slope_ms * mean_batch;
  }
  if (fit.intercept_ms < 0) {
    // A step never costs less than nothing: the least-squares line through the origin instead.
    double sbb = 0, sbg = 0;
    for (const DecodeSample& s : samples) {
      sbb += static_cast<double>(s.batch_size) * s.batch_size;
      sbg += s.batch_size * s.gap_ms;
    }
    fit.intercept_ms = 0;
    fit.slope_ms = sbb > 0 ? sbg / sbb : 0;
  }
  return fit;
}

std::optional<double> LatencyModel::PrefillTokensPerSecond(const std::string& instance) const {
  const absl::Time now = options_.now();
  absl::MutexLock lock(&mu_);
  auto it = instances_.find(instance);
  if (it == instances_.end()) return std::nullopt;
  return TokensPerSecond(it->second.prefill, now);
}

std::optional<DecodeStepFit> LatencyModel::DecodeFit(const std::string& instance) const {
  const absl::Time now = options_.now();
  absl::MutexLock lock(&mu_);
  auto it = instances_.find(instance);
  if (it == instances_.end()) return std::nullopt;
  return Fit(it->second.decode, now);
}

std::optional<double> LatencyModel::PredictDecodeStepMs(const std::string& instance,
                                                        int batch_size) const {
  const std::optional<DecodeStepFit> fit = DecodeFit(instance);
  if (!fit) return std::nullopt;
  return fit->StepMs(batch_size);
}

std::vector<InstanceEstimate> LatencyModel::Estimates() const {
  const absl::Time now = options_.now();
  std::vector<InstanceEstimate> estimates;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, state] : instances_) {
      InstanceEstimate estimate{.name = name,
                                .prefill_tokens_per_s = TokensPerSecond(state.prefill, now),
                                .decode = Fit(state.decode, now)};
      if (estimate.prefill_tokens_per_s) estimate.num_prefill_samples = state.prefill.num_samples;
      if (estimate.prefill_tokens_per_s || estimate.decode) {
        estimates.push_back(std::move(estimate));
      }
    }
  }
  std::sort(estimates.begin(), estimates.end(),
            [](const InstanceEstimate& a, const InstanceEstimate& b) { return a.name < b.name; });
  return estimates;
}

}  // namespace baton::scheduler
