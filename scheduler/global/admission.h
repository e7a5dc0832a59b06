// SLO-based admission: whether a new request, validated and tokenized, may enter the deployment, from
// the LatencyModel's predictions and the scheduler's own load accounting. Pure logic, no RPC types.
//
// The rule (a request is rejected only here, at arrival; never once admitted):
//   - TTFT: on the instance the router would send the prefill to, predicted TTFT =
//     (its outstanding prefill tokens + this prompt's tokens) / its prefill throughput. Reject when it
//     exceeds ttft_ms.
//   - TPOT: on each live decode-capable instance, predicted TPOT = its decode step time at one more
//     request than it has. Reject when it exceeds tpot_ms on every one of them.
//   - A check whose SLO is unset is off. An instance without a prediction (nothing observed yet)
//     passes its check, and so does a deployment with no live instance to check (routing then fails
//     with UNAVAILABLE, which is not admission's business).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "scheduler/global/latency_model.h"
#include "scheduler/global/worker_registry.h"

namespace baton::scheduler {

// The SLOs admission enforces; unset: that check is off.
struct AdmissionPolicy {
  std::optional<double> ttft_ms;  // > 0
  std::optional<double> tpot_ms;  // > 0

  bool enabled() const { return ttft_ms.has_value() || tpot_ms.has_value(); }
};

// What the decision looks at.
struct AdmissionRequest {
  int64_t num_prompt_tokens = 0;
  std::optional<InstanceLoad> prefill_instance;  // the router's pick for the prefill, if any is live
  std::vector<InstanceLoad> decode_instances;    // every live decode-capable instance
};

struct AdmissionDecision {
  // OK: admit. ResourceExhausted: reject; the message gives the prediction, the SLO and what the
  // prediction came from, and ends with "retry later".
  absl::Status status;
  std::optional<double> predicted_ttft_ms;  // on prefill_instance, when it has a throughput
  std::optional<double> predicted_tpot_ms;  // the lowest over the decode instances with a fit
  std::string predicted_tpot_instance;      // where predicted_tpot_ms is
};

// Predictions are made whatever the policy (for logs); only the checks the policy sets can reject.
AdmissionDecision DecideAdmission(const AdmissionPolicy& policy, const LatencyModel& model,
                                  const AdmissionRequest& request);

// "2310", "12.5", "0.42": milliseconds with the digits that matter at that size.
std::string FormatMs(double ms);

}  // namespace baton::scheduler
