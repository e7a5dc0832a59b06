#include "runtime/model/checkpoint_quantization.h"

#include <regex>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace baton::runtime {
namespace {

using Json = nlohmann::json;
using Layout = CheckpointQuantization::Layout;

absl::Status Unsupported(const std::filesystem::path& path, const std::string& field,
                         const std::string& what) {
  return absl::UnimplementedError(absl::StrCat(
      path.string(), ": quantization_config.", field, " ", what,
      " is not supported yet (read: compressed-tensors int8 per channel, int4 in groups, "
      "symmetric, and fp8 per tensor, channel or block; AWQ gemm; GPTQ 4-bit without act-order; "
      "fp8 e4m3)"));
}

std::string ValueText(const Json& value) { return value.is_string() ? value.get<std::string>() : value.dump(); }

// `key` of `object` must equal `wanted`.
absl::Status Expect(const Json& object, const char* key, const Json& wanted,
                    const std::filesystem::path& path, const std::string& field) {
  const auto it = object.find(key);
  if (it == object.end() || *it != wanted) {
    return Unsupported(path, field.empty() ? key : absl::StrCat(field, ".", key),
                       it == object.end() ? "(absent)" : ValueText(*it));
  }
  return absl::OkStatus();
}

// A positive group size from `value` (which may be -1 where `minus_one_is_row` allows: one group
// per row, returned as 0).
absl::StatusOr<int> GroupSize(const Json& value, bool minus_one_is_row,
                              const std::filesystem::path& path, const std::string& field) {
  if (value.is_number_integer()) {
    const int group = value.get<int>();
    if (group > 0) return group;
    if (group == -1 && minus_one_is_row) return 0;
  }
  return Unsupported(path, field, ValueText(value));
}

// A [rows, columns] block of positive sizes from `value`, for the fp8 layouts.
absl::Status ReadFp8Block(const Json& value, const std::filesystem::path& path,
                          const std::string& field, CheckpointQuantization& out) {
  if (!value.is_array() || value.size() != 2 || !value[0].is_number_integer() ||
      !value[1].is_number_integer() || value[0].get<int>() <= 0 || value[1].get<int>() <= 0) {
    return Unsupported(path, field, ValueText(value));
  }
  out.fp8_block_rows = value[0].get<int>();
  out.fp8_block_cols = value[1].get<int>();
  return absl::OkStatus();
}

// A compressed-tensors config group's fp8 "weights": E4M3, symmetric, per tensor, channel or block.
absl::Status ReadCompressedTensorsFp8(const Json& weights, const std::filesystem::path& path,
                                      const std::string& field, CheckpointQuantization& out) {
  if (absl::Status s = Expect(weights, "num_bits", 8, path, field); !s.ok()) return s;
  if (absl::Status s = Expect(weights, "symmetric", true, path, field); !s.ok()) return s;
  const std::string strategy = weights.value("strategy", std::string());
  if (strategy == "block") {
    const auto block = weights.find("block_structure");
    if (block == weights.end()) return Unsupported(path, field + ".block_structure", "(absent)");
    return ReadFp8Block(*block, path, field + ".block_structure", out);
  }
  if (strategy != "tensor" && strategy != "channel") {
    return Unsupported(path, field + ".strategy", absl::StrCat("'", strategy, "'"));
  }
  return absl::OkStatus();
}

// One compressed-tensors config group's "weights": int8 per channel, or int4 in groups (pack-
// quantized), symmetric. Sets `bits` and `group`.
absl::Status ReadCompressedTensorsWeights(const Json& weights, const std::filesystem::path& path,
                                          const std::string& field, int* bits, int* group) {
  if (!weights.is_object()) return Unsupported(path, field, "(not an object)");
  const auto num_bits = weights.find("num_bits");
  if (num_bits == weights.end() || (*num_bits != 8 && *num_bits != 4)) {
    return Unsupported(path, field + ".num_bits",
                       num_bits == weights.end() ? "(absent)" : ValueText(*num_bits));
  }
  *bits = num_bits->get<int>();
  if (absl::Status s = Expect(weights, "type", "int", path, field); !s.ok()) return s;
  if (absl::Status s = Expect(weights, "symmetric", true, path, field); !s.ok()) return s;
  if (*bits == 8) {
    if (absl::Status s = Expect(weights, "strategy", "channel", path, field); !s.ok()) return s;
    *group = 0;
  } else {
    if (absl::Status s = Expect(weights, "strategy", "group", path, field); !s.ok()) return s;
    const auto it = weights.find("group_size");
    if (it == weights.end()) return Unsupported(path, field + ".group_size", "(absent)");
    absl::StatusOr<int> g = GroupSize(*it, false, path, field + ".group_size");
    if (!g.ok()) return g.status();
    *group = *g;
  }
  if (const auto it = weights.find("actorder"); it != weights.end() && !it->is_null() &&
                                                 *it != false) {
    return Unsupported(path, absl::StrCat(field, ".actorder"), ValueText(*it));
  }
  return absl::OkStatus();
}

absl::Status ReadIgnore(const Json& q, const std::filesystem::path& path,
                        CheckpointQuantization& out) {
  const auto ignore = q.find("ignore");
  if (ignore == q.end() || ignore->is_null()) return absl::OkStatus();
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
  return absl::OkStatus();
}

absl::StatusOr<CheckpointQuantization> ReadCompressedTensors(const Json& q,
                                                             const std::filesystem::path& path) {
  CheckpointQuantization out;
  out.format = q.value("format", std::string());
  if (out.format != "int-quantized" && out.format != "naive-quantized" &&
      out.format != "pack-quantized" && out.format != "float-quantized") {
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
  int bits = 0;
  int group = 0;
  bool fp8 = false;
  for (const auto& [name, config_group] : groups->items()) {
    const std::string field = absl::StrCat("config_groups.", name);
    if (!config_group.is_object()) return Unsupported(path, field, "(not an object)");
    const auto targets = config_group.find("targets");
    if (targets == config_group.end() || *targets != Json::array({"Linear"})) {
      return Unsupported(path, field + ".targets",
                         targets == config_group.end() ? "(absent)" : targets->dump());
    }
    const auto weights = config_group.find("weights");
    if (weights == config_group.end()) return Unsupported(path, field + ".weights", "(absent)");
    if (weights->is_object() && weights->value("type", std::string()) == "float") {
      // Every group the same fp8 scheme: the last group read sets the block, checked equal here.
      CheckpointQuantization scheme;
      if (absl::Status s = ReadCompressedTensorsFp8(*weights, path, field + ".weights", scheme);
          !s.ok()) {
        return s;
      }
      if (bits != 0 && (!fp8 || scheme.fp8_block_rows != out.fp8_block_rows ||
                        scheme.fp8_block_cols != out.fp8_block_cols)) {
        return Unsupported(path, "config_groups", "(groups with different weight schemes)");
      }
      fp8 = true;
      bits = 8;
      out.fp8_block_rows = scheme.fp8_block_rows;
      out.fp8_block_cols = scheme.fp8_block_cols;
      continue;
    }
    if (fp8) return Unsupported(path, "config_groups", "(groups with different weight schemes)");
    int group_bits = 0;
    int group_size = 0;
    if (absl::Status s = ReadCompressedTensorsWeights(*weights, path, field + ".weights",
                                                      &group_bits, &group_size);
        !s.ok()) {
      return s;
    }
    if (bits != 0 && (group_bits != bits || group_size != group)) {
      return Unsupported(path, "config_groups", "(groups with different weight schemes)");
    }
    bits = group_bits;
    group = group_size;
  }
  if (fp8) {
    if (out.format != "float-quantized" && out.format != "naive-quantized") {
      return Unsupported(path, "format", absl::StrCat("'", out.format, "' with fp8 weights"));
    }
    out.layout = Layout::kFp8;
    out.weight_dtype = DType::kF8E4M3;
  } else if (out.format == "float-quantized") {
    return Unsupported(path, "format", "'float-quantized' with integer weights");
  } else if (bits == 4) {
    if (out.format != "pack-quantized") {
      return Unsupported(path, "format", absl::StrCat("'", out.format, "' with 4-bit weights"));
    }
    out.layout = Layout::kPacked4;
    out.weight_dtype = DType::kI4;
    out.group_size = group;
  } else {
    out.layout = out.format == "pack-quantized" ? Layout::kPacked8 : Layout::kInt8;
  }
  if (const auto kv = q.find("kv_cache_scheme"); kv != q.end() && !kv->is_null()) {
    return Unsupported(path, "kv_cache_scheme", kv->dump());
  }
  if (absl::Status s = ReadIgnore(q, path, out); !s.ok()) return s;
  return out;
}

// Strings of a config's list field (absent or null: none), appended to `out`.
absl::Status ReadStrings(const Json& q, const char* key, const std::filesystem::path& path,
                         std::vector<std::string>& out) {
  const auto it = q.find(key);
  if (it == q.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_array()) return Unsupported(path, key, it->dump());
  for (const Json& entry : *it) {
    if (!entry.is_string()) return Unsupported(path, key, entry.dump());
    out.push_back(entry.get<std::string>());
  }
  return absl::OkStatus();
}

absl::StatusOr<CheckpointQuantization> ReadAwq(const Json& q, const std::filesystem::path& path) {
  CheckpointQuantization out{.layout = Layout::kAwq, .weight_dtype = DType::kI4, .format = "awq"};
  // AutoAWQ writes "w_bit" and "q_group_size" in its own quant_config; transformers' config.json
  // carries "bits" and "group_size".
  const char* bits_key = q.contains("bits") ? "bits" : "w_bit";
  if (absl::Status s = Expect(q, bits_key, 4, path, ""); !s.ok()) return s;
  const char* group_key = q.contains("group_size") ? "group_size" : "q_group_size";
  if (!q.contains(group_key)) return Unsupported(path, "group_size", "(absent)");
  absl::StatusOr<int> group = GroupSize(q[group_key], false, path, group_key);
  if (!group.ok()) return group.status();
  out.group_size = *group;
  if (const auto it = q.find("zero_point"); it != q.end() && *it != true) {
    return Unsupported(path, "zero_point", ValueText(*it));
  }
  if (const auto it = q.find("version"); it != q.end() && !it->is_null()) {
    if (!it->is_string() || absl::AsciiStrToLower(it->get<std::string>()) != "gemm") {
      return Unsupported(path, "version", ValueText(*it));
    }
  }
  if (absl::Status s = ReadStrings(q, "modules_to_not_convert", path, out.not_converted); !s.ok()) {
    return s;
  }
  return out;
}

absl::StatusOr<CheckpointQuantization> ReadGptq(const Json& q, const std::filesystem::path& path) {
  CheckpointQuantization out{.layout = Layout::kGptq, .weight_dtype = DType::kI4, .format = "gptq"};
  if (absl::Status s = Expect(q, "bits", 4, path, ""); !s.ok()) return s;
  if (!q.contains("group_size")) return Unsupported(path, "group_size", "(absent)");
  absl::StatusOr<int> group = GroupSize(q["group_size"], true, path, "group_size");
  if (!group.ok()) return group.status();
  out.group_size = *group;
  if (const auto it = q.find("desc_act"); it != q.end() && *it != false) {
    return Unsupported(path, "desc_act", ValueText(*it));
  }
  if (const auto it = q.find("lm_head"); it != q.end() && *it != false) {
    return Unsupported(path, "lm_head", ValueText(*it));
  }
  const std::string format = q.value("checkpoint_format", std::string("gptq"));
  if (format != "gptq" && format != "gptq_v2") {
    return Unsupported(path, "checkpoint_format", absl::StrCat("'", format, "'"));
  }
  out.gptq_zero_minus_one = format == "gptq";
  return out;
}

absl::StatusOr<CheckpointQuantization> ReadFp8(const Json& q, const std::filesystem::path& path) {
  CheckpointQuantization out{.layout = Layout::kFp8, .weight_dtype = DType::kF8E4M3, .format = "fp8"};
  if (const auto it = q.find("fmt"); it != q.end() && *it != "e4m3") {
    return Unsupported(path, "fmt", ValueText(*it));
  }
  if (const auto it = q.find("activation_scheme");
      it != q.end() && *it != "dynamic" && *it != "static") {
    return Unsupported(path, "activation_scheme", ValueText(*it));
  }
  if (const auto it = q.find("weight_block_size"); it != q.end() && !it->is_null()) {
    if (absl::Status s = ReadFp8Block(*it, path, "weight_block_size", out); !s.ok()) return s;
    out.fp8_scale_name = "weight_scale_inv";
  }
  if (absl::Status s = ReadStrings(q, "ignored_layers", path, out.not_converted); !s.ok()) return s;
  if (absl::Status s = ReadStrings(q, "modules_to_not_convert", path, out.not_converted); !s.ok()) {
    return s;
  }
  return out;
}

}  // namespace

bool CheckpointQuantization::Quantizes(std::string_view module) const {
  if (layout == Layout::kAwq || layout == Layout::kGptq || format == "fp8") {
    if (module == "lm_head") return false;
    for (const std::string& part : not_converted) {
      if (module.find(part) != std::string_view::npos) return false;
    }
    return true;
  }
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
  absl::StatusOr<CheckpointQuantization> out;
  if (method == "compressed-tensors") {
    out = ReadCompressedTensors(q, path);
  } else if (method == "awq") {
    out = ReadAwq(q, path);
  } else if (method == "gptq") {
    out = ReadGptq(q, path);
  } else if (method == "fp8") {
    out = ReadFp8(q, path);
  } else {
    return Unsupported(path, "quant_method", absl::StrCat("'", method, "'"));
  }
  if (!out.ok()) return out.status();
  return std::optional<CheckpointQuantization>(*std::move(out));
}

}  // namespace baton::runtime
