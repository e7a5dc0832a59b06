#include "scheduler/planner/latency_coefficients.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace baton::scheduler::planner {
namespace {

using Json = nlohmann::json;

absl::StatusOr<std::array<double, 3>> ParseTriple(const Json& value, const std::string& key) {
  if (!value.is_array() || value.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": must be a list of three numbers"));
  }
  std::array<double, 3> out{};
  for (int i = 0; i < 3; ++i) {
    if (!value[i].is_number() || !std::isfinite(value[i].get<double>())) {
      return absl::InvalidArgumentError(absl::StrCat(key, "[", i, "]: must be a finite number"));
    }
    out[i] = value[i].get<double>();
  }
  return out;
}

absl::StatusOr<std::string> OptionalString(const Json& doc, const char* key) {
  if (!doc.contains(key)) return std::string();
  if (!doc[key].is_string()) return absl::InvalidArgumentError(absl::StrCat(key, ": must be a string"));
  return doc[key].get<std::string>();
}

// A factor below 0.5 would say serving runs steps twice as fast as the engine alone: a bad file.
absl::StatusOr<ServingSlowdown> ParseSlowdown(const Json& value) {
  if (!value.is_object()) return absl::InvalidArgumentError("serving_slowdown: must be an object");
  ServingSlowdown out;
  const std::pair<const char*, double*> fields[] = {{"prefill_alone", &out.prefill_alone},
                                                    {"prefill_shared", &out.prefill_shared},
                                                    {"decode_alone", &out.decode_alone},
                                                    {"decode_shared", &out.decode_shared}};
  for (const auto& [key, factor] : value.items()) {
    auto field = std::find_if(std::begin(fields), std::end(fields),
                              [&key = key](const auto& f) { return key == f.first; });
    if (field == std::end(fields)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown key '", key, "' in serving_slowdown"));
    }
    if (!factor.is_number() || !std::isfinite(factor.get<double>()) || factor.get<double>() < 0.5) {
      return absl::InvalidArgumentError(
          absl::StrCat("serving_slowdown.", key, ": must be a number >= 0.5 (1 = as profiled)"));
    }
    *field->second = factor.get<double>();
  }
  return out;
}

}  // namespace

double TpCoefficients::PrefillMs(double sum_tokens, double sum_tokens_squared) const {
  return std::max(0.0, prefill.a_ms + prefill.b_ms * sum_tokens + prefill.c_ms * sum_tokens_squared);
}

double TpCoefficients::DecodeMs(int batch_size, double sum_context) const {
  const DecodeCoefficients& c =
      decode_large.has_value() && batch_size >= decode_large_batch_threshold ? *decode_large : decode;
  return std::max(0.0, c.a_ms + c.b_ms * sum_context + c.c_ms * batch_size);
}

const TpCoefficients* LatencyCoefficients::ForTp(int tp) const {
  auto it = by_tp.find(tp);
  return it == by_tp.end() ? nullptr : &it->second;
}

absl::StatusOr<LatencyCoefficients> ParseLatencyCoefficients(absl::string_view json_text) {
  const Json doc = Json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  if (!doc.is_object()) return absl::InvalidArgumentError("top level: must be an object");
  for (const auto& [key, value] : doc.items()) {
    if (key != "model" && key != "device" && key != "source" && key != "tp" && key != "serving_slowdown") {
      return absl::InvalidArgumentError(absl::StrCat("unknown key '", key, "' at top level"));
    }
  }
  LatencyCoefficients out;
  absl::StatusOr<std::string> model = OptionalString(doc, "model");
  if (!model.ok()) return model.status();
  absl::StatusOr<std::string> device = OptionalString(doc, "device");
  if (!device.ok()) return device.status();
  absl::StatusOr<std::string> source = OptionalString(doc, "source");
  if (!source.ok()) return source.status();
  out.model = *model;
  out.device = *device;
  out.source = *source;
  if (doc.contains("serving_slowdown")) {
    absl::StatusOr<ServingSlowdown> slowdown = ParseSlowdown(doc["serving_slowdown"]);
    if (!slowdown.ok()) return slowdown.status();
    out.serving_slowdown = *slowdown;
  }
  if (!doc.contains("tp") || !doc["tp"].is_object() || doc["tp"].empty()) {
    return absl::InvalidArgumentError("tp: must be an object with one entry per tensor-parallel degree");
  }
  for (const auto& [tp_text, entry] : doc["tp"].items()) {
    const std::string path = absl::StrCat("tp.", tp_text);
    int tp = 0;
    if (!absl::SimpleAtoi(tp_text, &tp) || tp < 1) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": the key must be a positive integer"));
    }
    if (!entry.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": must be an object"));
    for (const auto& [key, value] : entry.items()) {
      if (key != "prefill" && key != "decode" && key != "decode_large" &&
          key != "decode_large_batch_threshold") {
        return absl::InvalidArgumentError(absl::StrCat("unknown key '", key, "' in ", path));
      }
    }
    if (!entry.contains("prefill") || !entry.contains("decode")) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": needs both prefill and decode"));
    }
    TpCoefficients c;
    absl::StatusOr<std::array<double, 3>> prefill = ParseTriple(entry["prefill"], path + ".prefill");
    if (!prefill.ok()) return prefill.status();
    c.prefill = {(*prefill)[0], (*prefill)[1], (*prefill)[2]};
    absl::StatusOr<std::array<double, 3>> decode = ParseTriple(entry["decode"], path + ".decode");
    if (!decode.ok()) return decode.status();
    c.decode = {(*decode)[0], (*decode)[1], (*decode)[2]};
    const bool has_large = entry.contains("decode_large");
    const bool has_threshold = entry.contains("decode_large_batch_threshold");
    if (has_large != has_threshold) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": decode_large and decode_large_batch_threshold go together"));
    }
    if (has_large) {
      absl::StatusOr<std::array<double, 3>> large =
          ParseTriple(entry["decode_large"], path + ".decode_large");
      if (!large.ok()) return large.status();
      c.decode_large = DecodeCoefficients{(*large)[0], (*large)[1], (*large)[2]};
      const Json& threshold = entry["decode_large_batch_threshold"];
      if (!threshold.is_number_integer() || threshold.get<int64_t>() < 1 ||
          threshold.get<int64_t>() > (1 << 20)) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ".decode_large_batch_threshold: must be a positive integer"));
      }
      c.decode_large_batch_threshold = threshold.get<int>();
    }
    out.by_tp[tp] = c;
  }
  return out;
}

std::string LatencyCoefficientsToJson(const LatencyCoefficients& coefficients) {
  Json doc;
  doc["model"] = coefficients.model;
  doc["device"] = coefficients.device;
  doc["source"] = coefficients.source;
  Json tps = Json::object();
  for (const auto& [tp, c] : coefficients.by_tp) {
    Json entry;
    entry["prefill"] = {c.prefill.a_ms, c.prefill.b_ms, c.prefill.c_ms};
    entry["decode"] = {c.decode.a_ms, c.decode.b_ms, c.decode.c_ms};
    if (c.decode_large.has_value()) {
      entry["decode_large"] = {c.decode_large->a_ms, c.decode_large->b_ms, c.decode_large->c_ms};
      entry["decode_large_batch_threshold"] = c.decode_large_batch_threshold;
    }
    tps[std::to_string(tp)] = entry;
  }
  doc["tp"] = tps;
  if (!coefficients.serving_slowdown.IsIdentity()) {
    const ServingSlowdown& s = coefficients.serving_slowdown;
    doc["serving_slowdown"] = {{"prefill_alone", s.prefill_alone},
                               {"prefill_shared", s.prefill_shared},
                               {"decode_alone", s.decode_alone},
                               {"decode_shared", s.decode_shared}};
  }
  return doc.dump(2) + "\n";
}

absl::StatusOr<LatencyCoefficients> LoadLatencyCoefficients(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read the coefficients file"));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<LatencyCoefficients> parsed = ParseLatencyCoefficients(text.str());
  if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", parsed.status().message()));
  return parsed;
}

}  // namespace baton::scheduler::planner
