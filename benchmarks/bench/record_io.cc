#include "benchmarks/bench/record_io.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace baton::bench {
namespace {

using nlohmann::json;

json StatsToJson(const Stats& stats) {
  return {{"count", stats.count}, {"mean", stats.mean}, {"p50", stats.p50}, {"p90", stats.p90},
          {"p99", stats.p99},     {"min", stats.min},   {"max", stats.max}};
}

json OptionalStats(const std::optional<Stats>& stats) {
  return stats ? StatsToJson(*stats) : json(nullptr);
}

template <typename T>
absl::Status Get(const json& object, const char* key, T* out) {
  const auto it = object.find(key);
  if (it == object.end()) return absl::InvalidArgumentError(absl::StrCat("record: missing ", key));
  try {
    *out = it->template get<T>();
  } catch (const json::exception&) {
    return absl::InvalidArgumentError(absl::StrCat("record: ", key, " has the wrong type"));
  }
  return absl::OkStatus();
}

}  // namespace

json RecordToJson(const RequestRecord& r) {
  json out = {{"request_idx", r.request_idx},
              {"warmup", r.warmup},
              {"input_len", r.input_len},
              {"output_len", r.output_len},
              {"arrival_s", r.arrival_s},
              {"sent_s", r.sent_s},
              {"end_s", r.end_s},
              {"token_s", r.token_s},
              {"num_output_tokens", r.num_output_tokens},
              {"num_prompt_tokens", r.num_prompt_tokens},
              {"num_cached_tokens", r.num_cached_tokens},
              {"ok", r.ok},
              {"cancelled", r.cancelled},
              {"error", r.error},
              {"finish_reason", r.finish_reason}};
  if (r.server) {
    out["server"] = {{"arrival_us", r.server->arrival_us},
                     {"prefill_start_us", r.server->prefill_start_us},
                     {"prefill_end_us", r.server->prefill_end_us},
                     {"kv_transfer_start_us", r.server->kv_transfer_start_us},
                     {"kv_transfer_end_us", r.server->kv_transfer_end_us},
                     {"token_emit_us", r.server->token_emit_us}};
  }
  if (const std::optional<RequestMetrics> metrics = ComputeMetrics(r)) {
    out["ttft_s"] = metrics->ttft_s;
    out["tpot_s"] = metrics->tpot_s ? json(*metrics->tpot_s) : json(nullptr);
    out["e2e_s"] = metrics->e2e_s;
    if (metrics->phases) {
      const PhaseBreakdown& p = *metrics->phases;
      out["phases"] = {
          {"queue_s", p.queue_s},
          {"prefill_s", p.prefill_s},
          {"kv_transfer_s", p.kv_transfer_s ? json(*p.kv_transfer_s) : json(nullptr)},
          {"first_decode_s", p.first_decode_s ? json(*p.first_decode_s) : json(nullptr)}};
    }
  }
  return out;
}

absl::StatusOr<RequestRecord> RecordFromJson(const json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("record: not a JSON object");
  RequestRecord r;
  for (absl::Status s :
       {Get(j, "request_idx", &r.request_idx), Get(j, "warmup", &r.warmup),
        Get(j, "input_len", &r.input_len), Get(j, "output_len", &r.output_len),
        Get(j, "arrival_s", &r.arrival_s), Get(j, "sent_s", &r.sent_s), Get(j, "end_s", &r.end_s),
        Get(j, "token_s", &r.token_s), Get(j, "num_output_tokens", &r.num_output_tokens),
        Get(j, "num_prompt_tokens", &r.num_prompt_tokens), Get(j, "ok", &r.ok),
        Get(j, "cancelled", &r.cancelled), Get(j, "error", &r.error),
        Get(j, "finish_reason", &r.finish_reason)}) {
    if (!s.ok()) return s;
  }
  if (j.contains("num_cached_tokens")) {  // records written before it was kept have none
    if (absl::Status s = Get(j, "num_cached_tokens", &r.num_cached_tokens); !s.ok()) return s;
  }
  if (const auto it = j.find("server"); it != j.end() && it->is_object()) {
    ServerTiming t;
    for (absl::Status s :
         {Get(*it, "arrival_us", &t.arrival_us), Get(*it, "prefill_start_us", &t.prefill_start_us),
          Get(*it, "prefill_end_us", &t.prefill_end_us),
          Get(*it, "kv_transfer_start_us", &t.kv_transfer_start_us),
          Get(*it, "kv_transfer_end_us", &t.kv_transfer_end_us),
          Get(*it, "token_emit_us", &t.token_emit_us)}) {
      if (!s.ok()) return s;
    }
    r.server = std::move(t);
  }
  return r;
}

json SummaryToJson(const RunSummary& s) {
  json slo_scales = json::array();
  for (const SloScalePoint& point : s.slo_scales) {
    slo_scales.push_back({{"scale", point.scale}, {"attainment", point.attainment}});
  }
  json faults = json::array();
  for (const FaultEvent& fault : s.faults) {
    faults.push_back({{"time_s", fault.time_s},
                      {"action", FaultActionName(fault.action)},
                      {"worker", fault.worker},
                      {"pid", fault.pid},
                      {"error", fault.error}});
  }
  return {
      {"label", s.label},
      {"workload", s.workload},
      {"arrivals", s.arrivals},
      {"rate_per_s", s.rate_per_s},
      {"num_measured", s.num_measured},
      {"num_warmup", s.num_warmup},
      {"num_completed", s.num_completed},
      {"num_failed", s.num_failed},
      {"num_cancelled", s.num_cancelled},
      {"measured_duration_s", s.measured_duration_s},
      {"request_throughput", s.request_throughput},
      {"output_token_throughput", s.output_token_throughput},
      {"input_token_throughput", s.input_token_throughput},
      {"prefix_hit_rate", s.prefix_hit_rate ? json(*s.prefix_hit_rate) : json(nullptr)},
      {"ttft_s", StatsToJson(s.ttft_s)},
      {"tpot_s", StatsToJson(s.tpot_s)},
      {"itl_s", StatsToJson(s.itl_s)},
      {"e2e_s", StatsToJson(s.e2e_s)},
      {"input_len", StatsToJson(s.input_len)},
      {"output_len", StatsToJson(s.output_len)},
      {"queue_s", OptionalStats(s.queue_s)},
      {"prefill_s", OptionalStats(s.prefill_s)},
      {"kv_transfer_s", OptionalStats(s.kv_transfer_s)},
      {"first_decode_s", OptionalStats(s.first_decode_s)},
      {"slo", s.slo ? json{{"ttft_s", s.slo->ttft_s}, {"tpot_s", s.slo->tpot_s}} : json(nullptr)},
      {"attainment", s.slo ? json(s.attainment) : json(nullptr)},
      {"slo_scales", slo_scales},
      {"dispatch",
       {{"max_concurrency", s.dispatch.max_concurrency},
        {"max_in_flight", s.dispatch.max_in_flight},
        {"num_delayed_by_cap", s.dispatch.num_delayed_by_cap},
        {"max_dispatch_lag_s", s.dispatch.max_dispatch_lag_s},
        {"num_not_sent", s.dispatch.num_not_sent},
        {"interrupted", s.dispatch.interrupted},
        {"duration_s", s.dispatch.duration_s}}},
      {"errors", s.errors},
      {"faults", faults}};
}

absl::Status WriteRecordsJsonl(const std::filesystem::path& path,
                               const std::vector<RequestRecord>& records) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path.string()));
  for (const RequestRecord& record : records) {
    out << RecordToJson(record).dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  }
  out.flush();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path.string()));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RequestRecord>> ReadRecordsJsonl(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path.string()));
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::vector<RequestRecord> records;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(buffer.str(), '\n')) {
    ++line_number;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    absl::StatusOr<RequestRecord> record =
        RecordFromJson(json::parse(line, nullptr, /*allow_exceptions=*/false));
    if (!record.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path.string(), ":", line_number, ": ", record.status().message()));
    }
    records.push_back(*std::move(record));
  }
  return records;
}

absl::Status WriteJsonFile(const std::filesystem::path& path, const nlohmann::json& json) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << json.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  out.flush();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path.string()));
  return absl::OkStatus();
}

}  // namespace baton::bench
