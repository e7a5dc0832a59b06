#include "runtime/model/checkpoint_quantization.h"

#include <regex>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace baton::runtime {
namespace {

using Json = nlohmann::json;

absl::Status Unsupported(const std::filesystem::path& path, const std::string& field,
                         const std::string& what) {
  return absl::UnimplementedError(absl::StrCat(
      path.string(), ": quantization_config.", field, " ", what,
      " is not supported yet (compressed-tensors int8 weights, symmetric, per channel, are)"));
}

std::string ValueText(const Json& value) { return value.is_string() ? value.get<std::string>() : value.dump(); }

// One config group's "weights" arguments must be int8, symmetric, per output channel.
absl::Status CheckWeightArgs(const Json& weights, const std::filesystem::path& path,
                             const std::string& field) {
  if (!weights.is_object()) return Unsupported(path, field, "(not an object)");
  auto expect = [&](const char* key, const Json& wanted) -> absl::Status {
    const auto it = weights.find(key);
    if (it == weights.end() || *it != wanted) {
      return Unsupported(path, absl::StrCat(field, ".", key),
                         it == weights.end() ? "(absent)" : ValueText(*it));
    }
    return absl::OkStatus();
  };
  if (absl::Status s = expect("num_bits", 8); !s.ok()) return s;
  if (absl::Status s = expect("type", "int"); !s.ok()) return s;
  if (absl::Status s = expect("symmetric", true); !s.ok()) return s;
  if (absl::Status s = expect("strategy", "channel"); !s.ok()) return s;
  if (const auto it = weights.find("actorder"); it != weights.end() && !it->is_null() &&
                                                 *it != false) {
    return Unsupported(path, absl::StrCat(field, ".actorder"), ValueText(*it));
  }
  return absl::OkStatus();
}

}  // namespace

bool CheckpointQuantization::Quantizes(std::string_view module) const {
  for (const std::string& entry : ignore) {
    if (entry.starts_with("re:")) {
      if (std::regex_match(module.begin(), module.end(), std::regex(entry.substr(3)))) return false;
    } else if (entry == module) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<std::optional<CheckpointQuantization>> ReadCheckpointQuantization(
    const Json& config, const std::filesystem::path& path) {
  const auto it = config.find("quantization_config");
  if (it == config.end() || it->is_null()) return std::nullopt;
  const Json& q = *it;
  if (!q.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path.string(), ": quantization_config is not an object"));
  }
  const std::string method = q.value("quant_method", std::string());
  if (method != "compressed-tensors") {
    return Unsupported(path, "quant_method", absl::StrCat("'", method, "'"));
  }
  CheckpointQuantization out;
  out.format = q.value("format", std::string());
  if (out.format == "int-quantized" || out.format == "naive-quantized") {
    out.layout = CheckpointQuantization::Layout::kInt8;
  } else if (out.format == "pack-quantized") {
    out.layout = CheckpointQuantization::Layout::kPacked8;
  } else {
    return Unsupported(path, "format", absl::StrCat("'", out.format, "'"));
  }
  if (const auto status = q.find("quantization_status");
      status != q.end() && *status != "compressed") {
    return Unsupported(path, "quantization_status", ValueText(*status));
  }
  const auto groups = q.find("config_groups");
  if (groups == q.end() || !groups->is_object() || groups->empty()) {
    return Unsupported(path, "config_groups", "(absent or empty)");
  }
  for (const auto& [name, group] : groups->items()) {
    const std::string field = absl::StrCat("config_groups.", name);
    if (!group.is_object()) return Unsupported(path, field, "(not an object)");
    const auto targets = group.find("targets");
    if (targets == group.end() || *targets != Json::array({"Linear"})) {
      return Unsupported(path, field + ".targets",
                         targets == group.end() ? "(absent)" : targets->dump());
    }
    const auto weights = group.find("weights");
    if (weights == group.end()) return Unsupported(path, field + ".weights", "(absent)");
    if (absl::Status s = CheckWeightArgs(*weights, path, field + ".weights"); !s.ok()) return s;
  }
  if (const auto kv = q.find("kv_cache_scheme"); kv != q.end() && !kv->is_null()) {
    return Unsupported(path, "kv_cache_scheme", kv->dump());
  }
  if (const auto ignore = q.find("ignore"); ignore != q.end() && !ignore->is_null()) {
    if (!ignore->is_array()) return Unsupported(path, "ignore", ignore->dump());
    for (const Json& entry : *ignore) {
      if (!entry.is_string()) return Unsupported(path, "ignore", entry.dump());
      out.ignore.push_back(entry.get<std::string>());
      if (out.ignore.back().starts_with("re:")) {
        try {
          std::regex check(out.ignore.back().substr(3));
        } catch (const std::regex_error&) {
          return absl::InvalidArgumentError(absl::StrCat(
              path.string(), ": quantization_config.ignore: '", out.ignore.back(),
              "' is not a valid regular expression"));
        }
      }
    }
  }
  return out;
}

}  // namespace baton::runtime
