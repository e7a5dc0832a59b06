// LatencyModel: the scheduler's online estimate of each worker instance's phase speeds, learned from
// the server-side timestamps of the phases it saw finish, and the TTFT / decode-step predictions that
// admission compares with the SLOs.
//
// Lifecycle: each request's flow (request_flow.h) feeds it (ObservePrefill when a prefill returns its
// first token, ObserveDecodeStep for every later token of a stream) and admission asks it
// (PrefillTokensPerSecond, PredictDecodeStepMs). Instances are keyed by name ("prefill worker 0", WorkerName), so a restarted
// instance keeps what its predecessor taught: same config, same hardware.
//
// The rules:
//   - Prefill (prefill and colocated instances): throughput = EWMA(prompt tokens) / EWMA(prefill
//     seconds) over completed prefills, both EWMAs with weight `prefill_alpha` on the newest sample.
//     The ratio of the two averages is a token-weighted average of the rate: a 1-token prompt, whose
//     duration is mostly fixed per-step cost, does not drag the estimate down as much as it would in
//     an average of per-request rates. Requests prefilled in the same engine step report the same
//     start; an observation whose start equals the instance's latest sample's is merged into that
//     sample (tokens added, the later end kept), so a batched step counts once with all its tokens.
//   - Decode (decode and colocated instances): step time = a + b * batch, the least-squares line
//     through the last `decode_window` (batch size, inter-token gap) observations, with b >= 0 (when
//     the fit's slope is negative, or every observation has the same batch size, b = 0 and a is their
//     mean).
//   - An instance with no (valid) observation predicts nothing: the getters return nullopt, and the
//     caller admits (it has nothing to reject on).
//   - Estimates expire: a phase of an instance not observed for `max_age` predicts nothing again,
//     and its next observation starts afresh. Admission learns only from the requests it admits, so
//     without this an instance that every request is shed from (after one slow outlier, such as a
//     cold first prefill) would never be tried, nor corrected, again.
//   - Invalid observations are ignored: tokens <= 0, end <= start, gap <= 0, batch < 1.
// Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace baton::scheduler {

struct LatencyModelOptions {
  double prefill_alpha = 0.2;  // EWMA weight of the newest prefill sample, in (0, 1]. Default 0.2.
  int decode_window = 256;     // decode observations per instance kept for the fit, >= 1.
  absl::Duration max_age = absl::Seconds(10);  // estimates expire this long after their last sample
  std::function<absl::Time()> now = &absl::Now;  // the scheduler's clock (tests inject their own)
};

// The decode fit of one instance: step_ms = intercept_ms + slope_ms * batch.
struct DecodeStepFit {
  double intercept_ms = 0;  // >= 0: where the least-squares line would cross below 0, the line
                            // through the origin is the fit
  double slope_ms = 0;  // >= 0
  int num_observations = 0;

  double StepMs(int batch_size) const;  // max(0, intercept_ms + slope_ms * batch_size)
};

// What the model knows about one instance (for logs and Health-style reports).
struct InstanceEstimate {
  std::string name;
  std::optional<double> prefill_tokens_per_s;  // nullopt: no prefill seen
  int num_prefill_samples = 0;                 // after merging same-step observations
  std::optional<DecodeStepFit> decode;         // nullopt: no decode step seen
};

class LatencyModel {
 public:
  // Pre-condition: options are in the ranges above (checked).
  explicit LatencyModel(LatencyModelOptions options = {});

  // A prefill of num_tokens prompt tokens on `instance` that entered an engine step at start_us and
  // produced its first token at end_us (worker clock, microseconds).
  void ObservePrefill(const std::string& instance, int64_t num_tokens, int64_t start_us,
                      int64_t end_us);
  // One decode step seen by one request: gap_us between two consecutive tokens it got from
  // `instance`, which had batch_size active requests at the time.
  void ObserveDecodeStep(const std::string& instance, int batch_size, int64_t gap_us);

  // nullopt until `instance` has a valid prefill observation.
  std::optional<double> PrefillTokensPerSecond(const std::string& instance) const;
  // The fit; nullopt until `instance` has a valid decode observation.
  std::optional<DecodeStepFit> DecodeFit(const std::string& instance) const;
  // DecodeFit(instance)->StepMs(batch_size), or nullopt.
  std::optional<double> PredictDecodeStepMs(const std::string& instance, int batch_size) const;

  // Every instance with an estimate that has not expired, sorted by name.
  std::vector<InstanceEstimate> Estimates() const;

 private:
  struct PrefillState {
    // EWMAs over the samples before the latest one; the latest is kept apart so that observations
    // of the same step can still be merged into it.
    double ewma_tokens_before = 0;
    double ewma_seconds_before = 0;
    int num_samples = 0;
    absl::Time last_observed;  // scheduler clock
    int64_t latest_start_us = 0;
    int64_t latest_end_us = 0;
    int64_t latest_num_tokens = 0;
  };
  struct DecodeSample {
    int batch_size;
    double gap_ms;
  };
  struct DecodeState {
    std::deque<DecodeSample> samples;  // the newest decode_window observations, oldest first
    absl::Time last_observed;          // scheduler clock
  };
  struct InstanceState {
    PrefillState prefill;
    DecodeState decode;
  };

  bool Expired(absl::Time last_observed, absl::Time now) const {
    return now - last_observed > options_.max_age;
  }
  std::optional<double> TokensPerSecond(const PrefillState& state, absl::Time now) const;
  std::optional<DecodeStepFit> Fit(const DecodeState& state, absl::Time now) const;

  const LatencyModelOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, InstanceState> instances_ ABSL_GUARDED_BY(mu_);
};

}  // namespace baton::scheduler
