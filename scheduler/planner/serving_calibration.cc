#include "scheduler/planner/serving_calibration.h"

#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace baton::scheduler::planner {
namespace {

struct Interval {
  double begin = 0;
  double end = 0;
};

// Sorted, non-overlapping union of the intervals.
std::vector<Interval> Union(std::vector<Interval> intervals) {
  std::sort(intervals.begin(), intervals.end(), [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
  std::vector<Interval> out;
  for (const Interval& i : intervals) {
    if (!out.empty() && i.begin <= out.back().end) {
      out.back().end = std::max(out.back().end, i.end);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

// How long [begin, end] overlaps a sorted, disjoint union.
double Overlap(const std::vector<Interval>& sorted, double begin, double end) {
  auto it = std::upper_bound(sorted.begin(), sorted.end(), begin,
                             [](double t, const Interval& i) { return t < i.end; });
  double total = 0;
  for (; it != sorted.end() && it->begin < end; ++it) total += std::min(end, it->end) - std::max(begin, it->begin);
  return total;
}

bool Contains(const std::vector<Interval>& sorted, double t) {
  auto it = std::upper_bound(sorted.begin(), sorted.end(), t, [](double x, const Interval& i) { return x < i.end; });
  return it != sorted.end() && it->begin <= t;
}

double Median(std::vector<double> values) {
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2 == 1) return values[mid];
  const double upper = values[mid];
  return (upper + *std::max_element(values.begin(), values.begin() + mid)) / 2;
}

// The two classes' medians; an empty class takes the other's.
std::pair<double, double> Factors(const std::vector<double>& alone, const std::vector<double>& shared) {
  const double a = alone.empty() ? Median(shared) : Median(alone);
  const double s = shared.empty() ? a : Median(shared);
  return {a, s};
}

// The fitted slowdown from each class's samples, checked for plausibility.
absl::StatusOr<ServingCalibration> FromSamples(const std::vector<double>& prefill_alone,
                                               const std::vector<double>& prefill_shared,
                                               const std::vector<double>& decode_alone,
                                               const std::vector<double>& decode_shared) {
  ServingCalibration out;
  std::tie(out.slowdown.prefill_alone, out.slowdown.prefill_shared) = Factors(prefill_alone, prefill_shared);
  std::tie(out.slowdown.decode_alone, out.slowdown.decode_shared) = Factors(decode_alone, decode_shared);
  for (double f : {out.slowdown.prefill_alone, out.slowdown.prefill_shared, out.slowdown.decode_alone,
                   out.slowdown.decode_shared}) {
    if (f < 0.5) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the served steps ran ", 1 / f, "x faster than the coefficients say: were they profiled on this "
          "machine, for this model and dtype?"));
    }
  }
  out.prefill_alone_samples = static_cast<int>(prefill_alone.size());
  out.prefill_shared_samples = static_cast<int>(prefill_shared.size());
  out.decode_alone_samples = static_cast<int>(decode_alone.size());
  out.decode_shared_samples = static_cast<int>(decode_shared.size());
  return out;
}

}  // namespace

absl::StatusOr<InstanceTrace> ParseStepTrace(absl::string_view jsonl) {
  InstanceTrace trace;
  bool have_header = false;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(jsonl, '\n', absl::SkipWhitespace())) {
    ++line_no;
    const nlohmann::json doc = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    auto bad = [line_no](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("step trace line ", line_no, ": ", why));
    };
    if (!doc.is_object()) return bad("not a JSON object");
    auto number = [&doc](const char* key, double* out) {
      const auto it = doc.find(key);
      if (it == doc.end() || !it->is_number()) return false;
      *out = it->get<double>();
      return true;
    };
    if (!have_header) {
      double tp = 0, pp = 0, instance = 0;
      const auto role = doc.find("role");
      if (role == doc.end() || !role->is_string() || !number("tp", &tp) || !number("pp", &pp) ||
          !number("instance", &instance) || tp < 1 || pp < 1) {
        return bad("expected the header {\"role\", \"instance\", \"tp\", \"pp\", ...}");
      }
      trace.name = absl::StrCat(role->get<std::string>(), " ", static_cast<int>(instance));
      trace.parallelism = {static_cast<int>(tp), static_cast<int>(pp)};
      have_header = true;
      continue;
    }
    double start_us = 0, end_us = 0, prompt_tokens = 0, squared = 0, decode_seqs = 0, context = 0;
    if (!number("start_us", &start_us) || !number("end_us", &end_us) ||
        !number("prompt_tokens", &prompt_tokens) || !number("prompt_tokens_squared", &squared) ||
        !number("decode_seqs", &decode_seqs) || !number("decode_context", &context)) {
      return bad("expected a step {\"start_us\", \"end_us\", \"prompt_tokens\", \"prompt_tokens_squared\", "
                 "\"decode_seqs\", \"decode_context\"}");
    }
    if (end_us < start_us) return bad("the step ends before it starts");
    const auto busy_after = doc.find("busy_after");
    trace.steps.push_back(TracedStep{.start_s = start_us / 1e6,
                                     .end_s = end_us / 1e6,
                                     .shape = {.prompt_tokens = prompt_tokens,
                                               .prompt_tokens_squared = squared,
                                               .num_decode_seqs = static_cast<int>(decode_seqs),
                                               .decode_context = context},
                                     .busy_after = busy_after != doc.end() && busy_after->is_boolean() &&
                                                   busy_after->get<bool>()});
  }
  if (!have_header) return absl::InvalidArgumentError("step trace: empty (no header line)");
  std::sort(trace.steps.begin(), trace.steps.end(),
            [](const TracedStep& a, const TracedStep& b) { return a.start_s < b.start_s; });
  return trace;
}

absl::StatusOr<ServingCalibration> FitSlowdownFromStepTraces(std::span<const InstanceTrace> traces,
                                                             const LatencyCoefficients& coefficients) {
  // [trace][step]: the step's serving time, to the next step's start when work was left.
  std::vector<std::vector<Interval>> served(traces.size());
  std::vector<std::vector<Interval>> busy;  // [trace]: when it was serving a step
  for (size_t t = 0; t < traces.size(); ++t) {
    const std::vector<TracedStep>& steps = traces[t].steps;
    for (size_t i = 0; i < steps.size(); ++i) {
      const bool to_next = steps[i].busy_after && i + 1 < steps.size() && steps[i + 1].start_s >= steps[i].end_s;
      served[t].push_back({steps[i].start_s, to_next ? steps[i + 1].start_s : steps[i].end_s});
    }
    busy.push_back(Union(served[t]));
  }
  std::vector<double> prefill_alone, prefill_shared, decode_alone, decode_shared;
  for (size_t t = 0; t < traces.size(); ++t) {
    const InstanceTrace& trace = traces[t];
    if (trace.parallelism.pp != 1) continue;
    const TpCoefficients* c = coefficients.ForTp(trace.parallelism.tp);
    if (c == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(trace.name, ": the coefficients have no tp ", trace.parallelism.tp));
    }
    for (size_t i = 0; i < trace.steps.size(); ++i) {
      const TracedStep& step = trace.steps[i];
      const double predicted_ms = ForwardMs(*c, step.shape);
      if (step.shape.empty() || predicted_ms <= 0) continue;
      bool shared = false;
      for (size_t other = 0; other < traces.size() && !shared; ++other) {
        shared = other != t && Contains(busy[other], step.start_s);
      }
      const double ratio = (served[t][i].end - served[t][i].begin) * 1e3 / predicted_ms;
      const bool prefill = step.shape.prompt_tokens > 0;
      (prefill ? (shared ? prefill_shared : prefill_alone) : (shared ? decode_shared : decode_alone))
          .push_back(ratio);
    }
  }
  if (prefill_alone.empty() && prefill_shared.empty()) {
    return absl::InvalidArgumentError("no step with prompt tokens in the traces of pp-1 instances");
  }
  if (decode_alone.empty() && decode_shared.empty()) {
    return absl::InvalidArgumentError("no decode-only step in the traces of pp-1 instances");
  }
  return FromSamples(prefill_alone, prefill_shared, decode_alone, decode_shared);
}

absl::StatusOr<ServingCalibration> FitServingSlowdown(std::span<const ServedRequest> requests,
                                                      const TpCoefficients& tp1) {
  std::vector<Interval> prefills, decodes;
  for (size_t r = 0; r < requests.size(); ++r) {
    const ServedRequest& req = requests[r];
    if (req.input_len < 1 || req.token_s.empty() || !(req.prefill_start_s <= req.prefill_end_s) ||
        !std::is_sorted(req.token_s.begin(), req.token_s.end()) ||
        (req.decode_start_s > 0 && req.decode_start_s > req.token_s.back())) {
      return absl::InvalidArgumentError(absl::StrCat("served request ", r, ": times out of order"));
    }
    prefills.push_back({req.prefill_start_s, req.prefill_end_s});
    if (req.decode_start_s > 0 && req.token_s.size() > 1) decodes.push_back({req.decode_start_s, req.token_s.back()});
  }
  const std::vector<Interval> prefill_busy = Union(prefills);
  const std::vector<Interval> decode_busy = Union(decodes);

  std::vector<double> prefill_alone, prefill_shared;
  for (const ServedRequest& req : requests) {
    const double step_s = req.prefill_end_s - req.prefill_start_s;
    if (step_s <= 0) continue;
    int overlapping = 0;  // itself included
    for (const Interval& other : prefills) {
      overlapping += other.begin < req.prefill_end_s && req.prefill_start_s < other.end;
    }
    if (overlapping > 1) continue;
    // The tokens the prefill computed, each attending to the cached ones before it too.
    const double cached = std::clamp(req.num_cached_tokens, 0, req.input_len - 1);
    const double n = req.input_len - cached;
    const double ratio = step_s * 1e3 / tp1.PrefillMs(n, n * (n + 2 * cached));
    const bool shared = Overlap(decode_busy, req.prefill_start_s, req.prefill_end_s) >= 0.5 * step_s;
    (shared ? prefill_shared : prefill_alone).push_back(ratio);
  }

  // Decode: one sample per gap, its batch counted over the requests in decode at the midpoint,
  // swept in time order so each gap looks only at the requests then in decode.
  struct Gap {
    double mid_s, length_s;
  };
  std::vector<Gap> gaps;
  std::vector<size_t> by_start;
  for (size_t r = 0; r < requests.size(); ++r) {
    const ServedRequest& req = requests[r];
    if (req.decode_start_s <= 0 || req.token_s.size() < 2) continue;
    by_start.push_back(r);
    for (size_t i = 1; i + 1 < req.token_s.size(); ++i) {
      const double length_s = req.token_s[i + 1] - req.token_s[i];
      if (length_s > 0) gaps.push_back({(req.token_s[i] + req.token_s[i + 1]) / 2, length_s});
    }
  }
  std::sort(gaps.begin(), gaps.end(), [](const Gap& a, const Gap& b) { return a.mid_s < b.mid_s; });
  std::sort(by_start.begin(), by_start.end(),
            [&](size_t a, size_t b) { return requests[a].decode_start_s < requests[b].decode_start_s; });
  std::vector<double> decode_alone, decode_shared;
  std::vector<size_t> active;
  size_t next = 0;
  for (const Gap& gap : gaps) {
    while (next < by_start.size() && requests[by_start[next]].decode_start_s <= gap.mid_s) active.push_back(by_start[next++]);
    std::erase_if(active, [&](size_t r) { return requests[r].token_s.back() < gap.mid_s; });
    if (active.empty()) continue;
    double context = 0;
    for (size_t r : active) {
      const std::vector<double>& t = requests[r].token_s;
      context += requests[r].input_len + static_cast<double>(std::upper_bound(t.begin(), t.end(), gap.mid_s) - t.begin());
    }
    const double ratio = gap.length_s * 1e3 / tp1.DecodeMs(static_cast<int>(active.size()), context);
    (Contains(prefill_busy, gap.mid_s) ? decode_shared : decode_alone).push_back(ratio);
  }
  if (prefill_alone.empty() && prefill_shared.empty()) {
    return absl::InvalidArgumentError("no prompt had a prefill step to itself: too few requests to calibrate");
  }
  if (decode_alone.empty() && decode_shared.empty()) {
    return absl::InvalidArgumentError(
        "no decode step in the records (a disaggregated run records when each request's KV arrived)");
  }
  return FromSamples(prefill_alone, prefill_shared, decode_alone, decode_shared);
}

}  // namespace baton::scheduler::planner
