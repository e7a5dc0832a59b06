#include "benchmarks/bench/metrics.h"

#include <algorithm>

namespace baton::bench {

std::optional<PhaseBreakdown> ComputePhases(const ServerTiming& timing) {
  if (timing.arrival_us == 0 || timing.prefill_start_us == 0 || timing.prefill_end_us == 0) {
    return std::nullopt;
  }
  PhaseBreakdown phases;
  phases.queue_s = (timing.prefill_start_us - timing.arrival_us) * 1e-6;
  phases.prefill_s = (timing.prefill_end_us - timing.prefill_start_us) * 1e-6;
  if (timing.kv_transfer_start_us != 0 && timing.kv_transfer_end_us != 0) {
    phases.kv_transfer_s = (timing.kv_transfer_end_us - timing.kv_transfer_start_us) * 1e-6;
  }
  if (timing.token_emit_us.size() >= 2) {
    const int64_t ready_us = std::max(timing.prefill_end_us, timing.kv_transfer_end_us);
    phases.first_decode_s = (timing.token_emit_us[1] - ready_us) * 1e-6;
  }
  return phases;
}

std::optional<RequestMetrics> ComputeMetrics(const RequestRecord& record) {
  if (!record.ok || record.token_s.empty()) return std::nullopt;
  RequestMetrics metrics;
  const double first_s = record.token_s.front();
  const double last_s = record.token_s.back();
  metrics.ttft_s = first_s - record.arrival_s;
  metrics.e2e_s = last_s - record.arrival_s;
  const int num_tokens = std::max<int>(record.num_output_tokens, record.token_s.size());
  if (num_tokens >= 2) metrics.tpot_s = (last_s - first_s) / (num_tokens - 1);
  for (size_t i = 1; i < record.token_s.size(); ++i) {
    metrics.itl_s.push_back(record.token_s[i] - record.token_s[i - 1]);
  }
  if (record.server) metrics.phases = ComputePhases(*record.server);
  return metrics;
}

}  // namespace baton::bench
