#include "scheduler/global/admission.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace baton::scheduler {

std::string FormatMs(double ms) {
  if (ms >= 100) return absl::StrFormat("%.0f", ms);
  if (ms >= 10) return absl::StrFormat("%.1f", ms);
  if (ms >= 1) return absl::StrFormat("%.2f", ms);
  return absl::StrFormat("%.3g", ms);
}

AdmissionDecision DecideAdmission(const AdmissionPolicy& policy, const LatencyModel& model,
                                  const AdmissionRequest& request) {
  AdmissionDecision decision;
  std::string ttft_reason;
  if (const std::optional<InstanceLoad>& prefill = request.prefill_instance) {
    if (const std::optional<double> tokens_per_s = model.PrefillTokensPerSecond(prefill->name)) {
      const int64_t num_tokens = prefill->outstanding_prefill_tokens + request.num_prompt_tokens;
      decision.predicted_ttft_ms = 1e3 * static_cast<double>(num_tokens) / *tokens_per_s;
      if (policy.ttft_ms && *decision.predicted_ttft_ms > *policy.ttft_ms) {
        ttft_reason = absl::StrCat(
            "predicted TTFT ", FormatMs(*decision.predicted_ttft_ms), " ms exceeds the ",
            FormatMs(*policy.ttft_ms), " ms SLO (", prefill->name, ": prefill queue ",
            prefill->outstanding_prefill_tokens, " + ", request.num_prompt_tokens,
            " prompt tokens at ", absl::StrFormat("%.0f", *tokens_per_s), " tokens/s)");
      }
    }
  }

  // TPOT: the request needs one decode-capable instance within the SLO; one that has no fit yet
  // counts as within.
  bool every_instance_predicted = !request.decode_instances.empty();
  std::optional<DecodeStepFit> best_fit;
  int best_batch = 0;
  for (const InstanceLoad& decode : request.decode_instances) {
    const std::optional<DecodeStepFit> fit = model.DecodeFit(decode.name);
    if (!fit) {
      every_instance_predicted = false;
      continue;
    }
    const int batch = decode.num_active_requests + 1;
    const double step_ms = fit->StepMs(batch);
    if (!decision.predicted_tpot_ms || step_ms < *decision.predicted_tpot_ms) {
      decision.predicted_tpot_ms = step_ms;
      decision.predicted_tpot_instance = decode.name;
      best_fit = fit;
      best_batch = batch;
    }
  }
  std::string tpot_reason;
  if (policy.tpot_ms && every_instance_predicted && *decision.predicted_tpot_ms > *policy.tpot_ms) {
    tpot_reason = absl::StrCat(
        "predicted TPOT ", FormatMs(*decision.predicted_tpot_ms), " ms exceeds the ",
        FormatMs(*policy.tpot_ms), " ms SLO on every decode instance (lowest: ",
        decision.predicted_tpot_instance, " at batch ", best_batch, ", step ",
        FormatMs(best_fit->intercept_ms), " ms + ", FormatMs(best_fit->slope_ms),
        " ms per request)");
  }

  if (!ttft_reason.empty() || !tpot_reason.empty()) {
    const char* separator = !ttft_reason.empty() && !tpot_reason.empty() ? "; " : "";
    decision.status = absl::ResourceExhaustedError(
        absl::StrCat(ttft_reason, separator, tpot_reason, "; retry later"));
  }
  return decision;
}

}  // namespace baton::scheduler
