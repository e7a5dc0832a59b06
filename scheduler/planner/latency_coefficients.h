// LatencyCoefficients: the fitted constants of the planner's latency model, one set per tensor-
// parallel degree, for one model on one device kind — and their JSON file form.
//
// Each set describes one whole forward pass (every layer, pp = 1) of a batch on tp devices, in
// milliseconds, the form DistServe fits (its simdistserve/estimators/time_estimator.py):
//   prefill step  = a + b * Σ tokens + c * Σ tokens²        (Σ over the batch's prompts; the
//                                                            square term is attention's)
//   decode step   = a + b * Σ context + c * batch           (Σ context over the batch's sequences)
// A second decode set may take over from `decode_large_batch_threshold` sequences on (DistServe
// fits small and large batches apart). The TP all-reduce is inside the fitted numbers: each tp is
// measured (profile) or computed with its all-reduce term (roofline).
//
// Three sources make them: `baton plan profile` (latency_fit.h: least squares on relative error
// over the engine's measured steps), the analytical roofline (roofline.h), or a file (this format;
// scheduler/planner/data/ ships DistServe's published A100 fits).
//
// JSON: {"model": "opt-13b", "device": "a100", "source": "...",
//        "tp": {"1": {"prefill": [a, b, c], "decode": [a, b, c],
//                     "decode_large": [a, b, c], "decode_large_batch_threshold": 95}, ...}}
// "decode_large" and its threshold are optional (together). An optional top-level
// "serving_slowdown": {"prefill_alone": f, "prefill_shared": f, "decode_alone": f, "decode_shared": f}
// scales the steps as served (ServingSlowdown); absent, every factor is 1.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace baton::scheduler::planner {

struct PrefillCoefficients {
  double a_ms = 0;           // per step
  double b_ms = 0;           // per prompt token
  double c_ms = 0;           // per squared prompt token (attention)
  bool operator==(const PrefillCoefficients&) const = default;
};

struct DecodeCoefficients {
  double a_ms = 0;  // per step
  double b_ms = 0;  // per context token of the batch
  double c_ms = 0;  // per sequence of the batch
  bool operator==(const DecodeCoefficients&) const = default;
};

struct TpCoefficients {
  PrefillCoefficients prefill;
  DecodeCoefficients decode;
  std::optional<DecodeCoefficients> decode_large;  // batches of >= decode_large_batch_threshold
  int decode_large_batch_threshold = 0;

  // Step times of one whole forward pass on tp devices, >= 0.
  double PrefillMs(double sum_tokens, double sum_tokens_squared) const;
  double DecodeMs(int batch_size, double sum_context) const;
  bool operator==(const TpCoefficients&) const = default;
};

// How much slower a step runs in a served deployment than the profile timed it alone, as factors
// (1.2 = 20% slower): "shared" while another instance on the same node is in a step, "alone"
// otherwise. On a CPU the cores of one node share memory bandwidth and the last-level cache, and the
// scheduler's and workers' own threads (token streaming, KV hand-off) run on the same cores, so a
// prefill next to a busy decode instance runs measurably slower (benchmarks/README.md, "The
// planner"). `baton plan calibrate` fits them from a served run's records (serving_calibration.h);
// GPU coefficients leave them at 1 (each instance owns its devices).
struct ServingSlowdown {
  double prefill_alone = 1;
  double prefill_shared = 1;
  double decode_alone = 1;
  double decode_shared = 1;
  double Factor(bool prefill, bool shared) const {
    return prefill ? (shared ? prefill_shared : prefill_alone) : (shared ? decode_shared : decode_alone);
  }
  bool IsIdentity() const { return *this == ServingSlowdown{}; }
  bool operator==(const ServingSlowdown&) const = default;
};

struct LatencyCoefficients {
  std::string model;   // informative: what they were fitted for
  std::string device;
  std::string source;  // "baton plan profile on ...", "roofline", or a citation
  std::map<int, TpCoefficients> by_tp;
  ServingSlowdown serving_slowdown;

  // nullptr when tp was not fitted.
  const TpCoefficients* ForTp(int tp) const;
  bool operator==(const LatencyCoefficients&) const = default;
};

// InvalidArgument naming the key for malformed JSON, a tp that is not a positive integer, a list
// that is not three finite numbers, a lone decode_large / threshold, or a slowdown factor that is
// not a finite number >= 0.5.
absl::StatusOr<LatencyCoefficients> ParseLatencyCoefficients(absl::string_view json_text);
std::string LatencyCoefficientsToJson(const LatencyCoefficients& coefficients);
// NotFound when the file cannot be read; parse errors are prefixed with the path.
absl::StatusOr<LatencyCoefficients> LoadLatencyCoefficients(const std::string& path);

}  // namespace baton::scheduler::planner
