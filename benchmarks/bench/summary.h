// The figures of a run: latency distributions, throughput, the server's phase breakdown, SLO
// attainment and the SLO-scale sweep, computed from the records of the measured requests (warm-up
// requests and requests cancelled by the client are left out; failed requests count as requests
// that missed their objectives).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "benchmarks/bench/fault.h"
#include "benchmarks/bench/metrics.h"

namespace baton::bench {

// Percentile q in [0, 100] of ascending `sorted` values, linearly interpolated between closest
// ranks (numpy's default). Pre-condition: sorted is not empty.
double Percentile(const std::vector<double>& sorted, double q);

struct Stats {
  int count = 0;
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double min = 0;
  double max = 0;
};

// All zeros for no value.
Stats ComputeStats(std::vector<double> values);

// Latency objectives, both must hold for a request to count.
struct Slo {
  double ttft_s = 0;  // > 0
  double tpot_s = 0;  // > 0
};

// TTFT <= ttft_s and (no TPOT, i.e. a one-token output, or TPOT <= tpot_s).
bool MeetsSlo(const RequestMetrics& metrics, const Slo& slo);

// Share of measured requests that completed and met `slo`, in [0, 1]; 0 when none was measured.
double Attainment(const std::vector<RequestRecord>& records, const Slo& slo);

struct SloScalePoint {
  double scale = 1;  // both objectives multiplied by it
  double attainment = 0;
};

// Attainment with both objectives scaled by each of `scales` (DistServe's SLO-scale figure: < 1
// tighter, > 1 looser).
std::vector<SloScalePoint> SloScaleSweep(const std::vector<RequestRecord>& records, const Slo& slo,
                                         const std::vector<double>& scales);

// 0.5, 0.75, 1, 1.25, 1.5, 2, 2.5, 3.
std::vector<double> DefaultSloScales();

struct RunSummary {
  std::string label;      // names the deployment in plots
  std::string workload;   // "chatbot"
  std::string arrivals;   // "poisson at 2 req/s"
  double rate_per_s = 0;  // the planned mean rate (0: a trace at its own pace)
  int num_measured = 0;   // requests in the figures (not warm-up, not cancelled)
  int num_warmup = 0;
  int num_completed = 0;  // measured requests that completed
  int num_failed = 0;     // measured requests that failed
  int num_cancelled = 0;  // cancelled by the client
  // From the first measured arrival to the last measured token.
  double measured_duration_s = 0;
  double request_throughput = 0;  // completed measured requests / measured_duration_s
  double output_token_throughput = 0;
  double input_token_throughput = 0;
  // Prompt tokens a prefix cache held / prompt tokens, over completed measured requests; present
  // when the server reported its cached tokens for every one of them.
  std::optional<double> prefix_hit_rate;
  Stats ttft_s, tpot_s, itl_s, e2e_s;
  // Of completed measured requests; input lengths are the server's counts when it gave them.
  Stats input_len, output_len;
  // Present when the server reported its phases for every completed measured request.
  std::optional<Stats> queue_s, prefill_s, kv_transfer_s, first_decode_s;
  std::optional<Slo> slo;
  double attainment = 0;                  // with slo
  std::vector<SloScalePoint> slo_scales;  // with slo
  DispatchStats dispatch;
  std::vector<std::string> errors;  // distinct error messages, up to 5
  std::vector<FaultEvent> faults;   // what `--fault` dealt during the run, in time order
};

struct SummaryOptions {
  std::string label;
  std::string workload;
  std::string arrivals;
  double rate_per_s = 0;
  std::optional<Slo> slo;
  std::vector<double> slo_scales = DefaultSloScales();
};

RunSummary Summarize(const std::vector<RequestRecord>& records, const DispatchStats& dispatch,
                     const SummaryOptions& options);

// A human-readable table (milliseconds), as `baton bench` prints it.
std::string FormatSummary(const RunSummary& summary);

}  // namespace baton::bench
