#include "benchmarks/bench/summary.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/common/check.h"

namespace baton::bench {
namespace {

bool Measured(const RequestRecord& record) { return !record.warmup && !record.cancelled; }

std::string FormatMs(const char* name, const Stats& stats) {
  return absl::StrFormat("  %-14s %10.2f %10.2f %10.2f %10.2f %10.2f\n", name, stats.mean * 1e3,
                         stats.p50 * 1e3, stats.p90 * 1e3, stats.p99 * 1e3, stats.max * 1e3);
}

}  // namespace

double Percentile(const std::vector<double>& sorted, double q) {
  BATON_CHECK(!sorted.empty());
  const double rank = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
}

Stats ComputeStats(std::vector<double> values) {
  Stats stats;
  if (values.empty()) return stats;
  std::sort(values.begin(), values.end());
  stats.count = static_cast<int>(values.size());
  stats.mean = std::accumulate(values.begin(), values.end(), 0.0) / values.size();
  stats.p50 = Percentile(values, 50);
  stats.p90 = Percentile(values, 90);
  stats.p99 = Percentile(values, 99);
  stats.min = values.front();
  stats.max = values.back();
  return stats;
}

bool MeetsSlo(const RequestMetrics& metrics, const Slo& slo) {
  return metrics.ttft_s <= slo.ttft_s && (!metrics.tpot_s || *metrics.tpot_s <= slo.tpot_s);
}

double Attainment(const std::vector<RequestRecord>& records, const Slo& slo) {
  int num_measured = 0;
  int num_met = 0;
  for (const RequestRecord& record : records) {
    if (!Measured(record)) continue;
    ++num_measured;
    const std::optional<RequestMetrics> metrics = ComputeMetrics(record);
    if (metrics && MeetsSlo(*metrics, slo)) ++num_met;
  }
  return num_measured == 0 ? 0.0 : static_cast<double>(num_met) / num_measured;
}

std::vector<SloScalePoint> SloScaleSweep(const std::vector<RequestRecord>& records, const Slo& slo,
                                         const std::vector<double>& scales) {
  std::vector<SloScalePoint> points;
  for (double scale : scales) {
    points.push_back({.scale = scale,
                      .attainment = Attainment(
                          records, {.ttft_s = slo.ttft_s * scale, .tpot_s = slo.tpot_s * scale})});
  }
  return points;
}

std::vector<double> DefaultSloScales() { return {0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0}; }

RunSummary Summarize(const std::vector<RequestRecord>& records, const DispatchStats& dispatch,
                     const SummaryOptions& options) {
  RunSummary summary;
  summary.label = options.label;
  summary.workload = options.workload;
  summary.arrivals = options.arrivals;
  summary.rate_per_s = options.rate_per_s;
  summary.dispatch = dispatch;
  std::vector<double> ttft, tpot, itl, e2e, input_len, output_len;
  std::vector<double> queue, prefill, kv_transfer, first_decode;
  bool all_phases = true;
  double first_arrival_s = INFINITY;
  double last_token_s = -INFINITY;
  double num_output_tokens = 0;
  double num_input_tokens = 0;
  double num_cached_tokens = 0;
  bool all_cached_known = true;
  for (const RequestRecord& record : records) {
    if (record.warmup) {
      ++summary.num_warmup;
      continue;
    }
    if (record.cancelled) {
      ++summary.num_cancelled;
      continue;
    }
    ++summary.num_measured;
    first_arrival_s = std::min(first_arrival_s, record.arrival_s);
    const std::optional<RequestMetrics> metrics = ComputeMetrics(record);
    if (!metrics) {
      ++summary.num_failed;
      const std::string error = record.error.empty() ? "no token received" : record.error;
      if (summary.errors.size() < 5 &&
          std::find(summary.errors.begin(), summary.errors.end(), error) == summary.errors.end()) {
        summary.errors.push_back(error);
      }
      continue;
    }
    ++summary.num_completed;
    last_token_s = std::max(last_token_s, record.token_s.back());
    num_output_tokens += record.num_output_tokens;
    // The server's count when it gave one: with text prompts it is what it actually prefilled.
    const int prompt_len =
        record.num_prompt_tokens >= 0 ? record.num_prompt_tokens : record.input_len;
    num_input_tokens += prompt_len;
    if (record.num_cached_tokens >= 0) {
      num_cached_tokens += record.num_cached_tokens;
    } else {
      all_cached_known = false;
    }
    ttft.push_back(metrics->ttft_s);
    e2e.push_back(metrics->e2e_s);
    if (metrics->tpot_s) tpot.push_back(*metrics->tpot_s);
    itl.insert(itl.end(), metrics->itl_s.begin(), metrics->itl_s.end());
    input_len.push_back(prompt_len);
    output_len.push_back(record.num_output_tokens);
    if (!metrics->phases) {
      all_phases = false;
      continue;
    }
    queue.push_back(metrics->phases->queue_s);
    prefill.push_back(metrics->phases->prefill_s);
    if (metrics->phases->kv_transfer_s) kv_transfer.push_back(*metrics->phases->kv_transfer_s);
    if (metrics->phases->first_decode_s) first_decode.push_back(*metrics->phases->first_decode_s);
  }
  if (summary.num_completed > 0 && last_token_s > first_arrival_s) {
    summary.measured_duration_s = last_token_s - first_arrival_s;
    summary.request_throughput = summary.num_completed / summary.measured_duration_s;
    summary.output_token_throughput = num_output_tokens / summary.measured_duration_s;
    summary.input_token_throughput = num_input_tokens / summary.measured_duration_s;
  }
  if (summary.num_completed > 0 && all_cached_known && num_input_tokens > 0) {
    summary.prefix_hit_rate = num_cached_tokens / num_input_tokens;
  }
  summary.ttft_s = ComputeStats(std::move(ttft));
  summary.tpot_s = ComputeStats(std::move(tpot));
  summary.itl_s = ComputeStats(std::move(itl));
  summary.e2e_s = ComputeStats(std::move(e2e));
  summary.input_len = ComputeStats(std::move(input_len));
  summary.output_len = ComputeStats(std::move(output_len));
  if (summary.num_completed > 0 && all_phases) {
    summary.queue_s = ComputeStats(std::move(queue));
    summary.prefill_s = ComputeStats(std::move(prefill));
    if (!kv_transfer.empty()) summary.kv_transfer_s = ComputeStats(std::move(kv_transfer));
    if (!first_decode.empty()) summary.first_decode_s = ComputeStats(std::move(first_decode));
  }
  if (options.slo) {
    summary.slo = options.slo;
    summary.attainment = Attainment(records, *options.slo);
    summary.slo_scales = SloScaleSweep(records, *options.slo, options.slo_scales);
  }
  return summary;
}

std::string FormatSummary(const RunSummary& s) {
  std::string out = absl::StrFormat("%s: workload %s, %s\n", s.label.empty() ? "run" : s.label,
                                    s.workload, s.arrivals);
  absl::StrAppendFormat(&out,
                        "requests: %d measured (%d completed, %d failed), %d warm-up excluded",
                        s.num_measured, s.num_completed, s.num_failed, s.num_warmup);
  if (s.num_cancelled > 0) absl::StrAppendFormat(&out, ", %d cancelled", s.num_cancelled);
  if (s.dispatch.num_not_sent > 0)
    absl::StrAppendFormat(&out, ", %d not sent", s.dispatch.num_not_sent);
  if (s.dispatch.interrupted) absl::StrAppend(&out, " (interrupted)");
  absl::StrAppendFormat(
      &out,
      "\nduration: %.2f s measured; throughput %.3f req/s, %.1f output tok/s, %.1f input tok/s\n",
      s.measured_duration_s, s.request_throughput, s.output_token_throughput,
      s.input_token_throughput);
  absl::StrAppendFormat(
      &out,
      "lengths: input mean %.1f (p50 %.0f, max %.0f), output mean %.1f (p50 %.0f, max %.0f)\n",
      s.input_len.mean, s.input_len.p50, s.input_len.max, s.output_len.mean, s.output_len.p50,
      s.output_len.max);
  if (s.prefix_hit_rate) {
    absl::StrAppendFormat(&out, "prefix cache: %.1f%% of prompt tokens reused\n", *s.prefix_hit_rate * 100);
  }
  absl::StrAppendFormat(&out, "  %-14s %10s %10s %10s %10s %10s\n", "latency (ms)", "mean", "p50",
                        "p90", "p99", "max");
  out += FormatMs("TTFT", s.ttft_s);
  out += FormatMs("TPOT", s.tpot_s);
  out += FormatMs("ITL", s.itl_s);
  out += FormatMs("E2E", s.e2e_s);
  if (s.queue_s) out += FormatMs("server queue", *s.queue_s);
  if (s.prefill_s) out += FormatMs("server prefill", *s.prefill_s);
  if (s.kv_transfer_s) out += FormatMs("KV transfer", *s.kv_transfer_s);
  if (s.first_decode_s) out += FormatMs("first decode", *s.first_decode_s);
  if (s.slo) {
    absl::StrAppendFormat(&out, "SLO attainment: %.1f%% (TTFT <= %.1f ms and TPOT <= %.1f ms)\n",
                          s.attainment * 100, s.slo->ttft_s * 1e3, s.slo->tpot_s * 1e3);
    out += "  SLO scale:";
    for (const SloScalePoint& point : s.slo_scales) {
      absl::StrAppendFormat(&out, " %gx %.1f%%", point.scale, point.attainment * 100);
    }
    out += "\n";
  }
  absl::StrAppendFormat(&out, "dispatch: max %d in flight (cap %d)", s.dispatch.max_in_flight,
                        s.dispatch.max_concurrency);
  if (s.dispatch.num_delayed_by_cap > 0) {
    absl::StrAppendFormat(&out, "; CAP HIT: %d requests waited for a slot",
                          s.dispatch.num_delayed_by_cap);
  }
  absl::StrAppendFormat(&out, "; max dispatch lag %.2f ms\n", s.dispatch.max_dispatch_lag_s * 1e3);
  for (const std::string& error : s.errors) absl::StrAppend(&out, "error: ", error, "\n");
  for (const FaultEvent& fault : s.faults) {
    absl::StrAppendFormat(&out, "fault at %.1f s: %s", fault.time_s, FaultActionName(fault.action));
    if (!fault.worker.empty()) absl::StrAppendFormat(&out, " %s (pid %d)", fault.worker, fault.pid);
    if (!fault.error.empty()) absl::StrAppend(&out, " NOT DEALT: ", fault.error);
    out += "\n";
  }
  return out;
}

}  // namespace baton::bench
