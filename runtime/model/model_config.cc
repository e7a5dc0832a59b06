#include "runtime/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string_view>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/common/status_macros.h"
#include "nlohmann/json.hpp"

namespace baton::runtime {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kConfigFile = "config.json";
constexpr std::string_view kGenerationConfigFile = "generation_config.json";

struct ArchitectureDefaults {
  std::string_view name;
  int max_position_embeddings;  // transformers' default for the architecture
  bool qkv_bias;                // implied, not read from config.json
};

constexpr ArchitectureDefaults kArchitectures[] = {
    {"LlamaForCausalLM", 2048, false},
    {"MistralForCausalLM", 4096 * 32, false},
    {"Qwen2ForCausalLM", 32768, true},
};

// Reads a parsed JSON file's top-level object and turns every field error into a Status naming the
// file and the field. Absent and null mean the same thing (transformers writes null for "unset").
class JsonReader {
 public:
  JsonReader(const Json& object, std::string file) : object_(object), file_(std::move(file)) {}

  const std::string& file() const { return file_; }

  // The value of `key`, or nullptr when absent or null.
  const Json* Find(std::string_view key) const {
    auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }

  absl::Status Error(std::string_view key, std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(file_, ": field '", std::string(key), "' ", std::string(what)));
  }

  absl::StatusOr<std::optional<int64_t>> OptionalInt(std::string_view key) const {
    const Json* value = Find(key);
    if (value == nullptr) return std::nullopt;
    return ToInt(key, *value);
  }

  absl::StatusOr<int> RequiredPositiveInt(std::string_view key) const {
    ASSIGN_OR_RETURN(std::optional<int64_t> value, OptionalInt(key));
    if (!value.has_value()) return Error(key, "is required but missing");
    return CheckPositive(key, *value);
  }

  absl::StatusOr<int> PositiveIntOr(std::string_view key, int fallback) const {
    ASSIGN_OR_RETURN(std::optional<int64_t> value, OptionalInt(key));
    return value.has_value() ? CheckPositive(key, *value) : fallback;
  }

  absl::StatusOr<std::optional<double>> OptionalNumber(std::string_view key) const {
    const Json* value = Find(key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_number()) {
      return Error(key, absl::StrCat("must be a number, got ", value->dump()));
    }
    return value->get<double>();
  }

  absl::StatusOr<double> NumberOr(std::string_view key, double fallback) const {
    ASSIGN_OR_RETURN(std::optional<double> value, OptionalNumber(key));
    return value.value_or(fallback);
  }

  absl::StatusOr<double> RequiredNumber(std::string_view key) const {
    ASSIGN_OR_RETURN(std::optional<double> value, OptionalNumber(key));
    if (!value.has_value()) return Error(key, "is required but missing");
    return *value;
  }

  absl::StatusOr<bool> BoolOr(std::string_view key, bool fallback) const {
    const Json* value = Find(key);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) {
      return Error(key, absl::StrCat("must be a boolean, got ", value->dump()));
    }
    return value->get<bool>();
  }

  absl::StatusOr<std::optional<std::string>> OptionalString(std::string_view key) const {
    const Json* value = Find(key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_string()) {
      return Error(key, absl::StrCat("must be a string, got ", value->dump()));
    }
    return value->get<std::string>();
  }

  // An int or a list of ints (eos_token_id); empty when absent or null.
  absl::StatusOr<std::vector<int32_t>> IntOrIntList(std::string_view key) const {
    const Json* value = Find(key);
    std::vector<int32_t> ids;
    if (value == nullptr) return ids;
    if (!value->is_array()) {
      ASSIGN_OR_RETURN(int64_t id, ToInt(key, *value));
      ids.push_back(static_cast<int32_t>(id));
      return ids;
    }
    for (const Json& element : *value) {
      ASSIGN_OR_RETURN(int64_t id, ToInt(key, element));
      ids.push_back(static_cast<int32_t>(id));
    }
    return ids;
  }

 private:
  absl::StatusOr<int64_t> ToInt(std::string_view key, const Json& value) const {
    if (!value.is_number_integer()) {
      return Error(key, absl::StrCat("must be an integer, got ", value.dump()));
    }
    const int64_t result = value.is_number_unsigned()
                               ? static_cast<int64_t>(std::min<uint64_t>(
                                     value.get<uint64_t>(), std::numeric_limits<int64_t>::max()))
                               : value.get<int64_t>();
    if (result < std::numeric_limits<int32_t>::min() ||
        result > std::numeric_limits<int32_t>::max()) {
      return Error(key, absl::StrCat("value ", result, " does not fit in 32 bits"));
    }
    return result;
  }

  absl::StatusOr<int> CheckPositive(std::string_view key, int64_t value) const {
    if (value <= 0) return Error(key, absl::StrCat("must be positive, got ", value));
    return static_cast<int>(value);
  }

  const Json& object_;
  std::string file_;
};

// Parses a whole JSON file that must hold an object. kNotFound if it does not exist.
absl::StatusOr<Json> ReadJsonObject(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path.string(), ": cannot open"));
  std::ostringstream text;
  text << in.rdbuf();
  Json json = Json::parse(text.str(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": malformed JSON"));
  }
  if (!json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": top level is not an object"));
  }
  return json;
}

absl::StatusOr<DType> ParseTorchDtype(const JsonReader& reader) {
  // transformers >= 4.56 writes "dtype"; older versions "torch_dtype".
  std::string_view key = "torch_dtype";
  ASSIGN_OR_RETURN(std::optional<std::string> name, reader.OptionalString(key));
  if (!name.has_value()) {
    key = "dtype";
    ASSIGN_OR_RETURN(name, reader.OptionalString(key));
  }
  if (!name.has_value() || *name == "float32") return DType::kF32;
  if (*name == "float16") return DType::kF16;
  if (*name == "bfloat16") return DType::kBF16;
  return reader.Error(key, absl::StrCat("has unsupported value '", *name,
                                        "' (supported: float32, float16, bfloat16)"));
}

// `rope` is the rope_scaling (or rope_parameters) object.
absl::StatusOr<kernels::RopeScaling> ParseRopeScaling(const JsonReader& rope,
                                                      std::string_view field) {
  kernels::RopeScaling scaling;
  ASSIGN_OR_RETURN(std::optional<std::string> type, rope.OptionalString("rope_type"));
  if (!type.has_value()) {
    ASSIGN_OR_RETURN(type, rope.OptionalString("type"));
  }
  if (!type.has_value() || *type == "default") return scaling;
  if (*type == "linear") {
    scaling.type = kernels::RopeScalingType::kLinear;
    ASSIGN_OR_RETURN(double factor, rope.RequiredNumber("factor"));
    scaling.factor = static_cast<float>(factor);
  } else if (*type == "llama3") {
    scaling.type = kernels::RopeScalingType::kLlama3;
    ASSIGN_OR_RETURN(double factor, rope.RequiredNumber("factor"));
    ASSIGN_OR_RETURN(double low, rope.RequiredNumber("low_freq_factor"));
    ASSIGN_OR_RETURN(double high, rope.RequiredNumber("high_freq_factor"));
    ASSIGN_OR_RETURN(scaling.original_max_position,
                     rope.RequiredPositiveInt("original_max_position_embeddings"));
    scaling.factor = static_cast<float>(factor);
    scaling.low_freq_factor = static_cast<float>(low);
    scaling.high_freq_factor = static_cast<float>(high);
    if (!(scaling.low_freq_factor < scaling.high_freq_factor)) {
      return rope.Error("high_freq_factor",
                        absl::StrCat("(", high, ") must exceed low_freq_factor (", low, ")"));
    }
  } else {
    return absl::UnimplementedError(absl::StrCat(rope.file(), ": ", std::string(field), " type '",
                                                 *type,
                                                 "' is not supported (supported: default, "
                                                 "linear, llama3)"));
  }
  if (!(scaling.factor > 0)) {
    return rope.Error("factor", absl::StrCat("must be positive, got ", scaling.factor));
  }
  return scaling;
}

// Fields of config.json that shape the model. Split from LoadModelConfig to keep each step short.
absl::Status ParseSizes(const JsonReader& reader, ModelConfig* config) {
  ASSIGN_OR_RETURN(config->hidden_size, reader.RequiredPositiveInt("hidden_size"));
  ASSIGN_OR_RETURN(config->num_layers, reader.RequiredPositiveInt("num_hidden_layers"));
  ASSIGN_OR_RETURN(config->num_heads, reader.RequiredPositiveInt("num_attention_heads"));
  ASSIGN_OR_RETURN(config->intermediate_size, reader.RequiredPositiveInt("intermediate_size"));
  ASSIGN_OR_RETURN(config->vocab_size, reader.RequiredPositiveInt("vocab_size"));
  ASSIGN_OR_RETURN(config->num_kv_heads,
                   reader.PositiveIntOr("num_key_value_heads", config->num_heads));
  if (reader.Find("head_dim") == nullptr) {
    if (config->hidden_size % config->num_heads != 0) {
      return reader.Error("num_attention_heads",
                          absl::StrCat("(", config->num_heads, ") must divide hidden_size (",
                                       config->hidden_size, ") when head_dim is not given"));
    }
    config->head_dim = config->hidden_size / config->num_heads;
  } else {
    ASSIGN_OR_RETURN(config->head_dim, reader.RequiredPositiveInt("head_dim"));
  }
  if (config->head_dim % 2 != 0) {
    return reader.Error("head_dim", absl::StrCat("must be even for RoPE, got ", config->head_dim));
  }
  if (config->num_heads % config->num_kv_heads != 0) {
    return reader.Error("num_key_value_heads", absl::StrCat("(", config->num_kv_heads,
                                                            ") must divide num_attention_heads (",
                                                            config->num_heads, ")"));
  }
  return absl::OkStatus();
}

// Features of the architecture that Baton's forward pass does not implement.
absl::Status CheckUnsupportedFeatures(const JsonReader& reader, const ModelConfig& config) {
  ASSIGN_OR_RETURN(std::optional<std::string> act, reader.OptionalString("hidden_act"));
  if (act.has_value() && *act != "silu") {
    return absl::UnimplementedError(absl::StrCat(reader.file(), ": field 'hidden_act' is '", *act,
                                                 "'; only 'silu' is supported"));
  }
  ASSIGN_OR_RETURN(bool mlp_bias, reader.BoolOr("mlp_bias", false));
  if (mlp_bias) {
    return absl::UnimplementedError(
        absl::StrCat(reader.file(), ": field 'mlp_bias' is true; MLP biases are not supported"));
  }
  if (config.architecture == "LlamaForCausalLM") {
    ASSIGN_OR_RETURN(bool attention_bias, reader.BoolOr("attention_bias", false));
    if (attention_bias) {
      return absl::UnimplementedError(
          absl::StrCat(reader.file(),
                       ": field 'attention_bias' is true for LlamaForCausalLM, which puts a bias "
                       "on o_proj too; not supported"));
    }
  }
  return absl::OkStatus();
}

absl::Status ParsePositions(const JsonReader& reader, int default_max_position,
                            ModelConfig* config) {
  ASSIGN_OR_RETURN(config->max_position_embeddings,
                   reader.PositiveIntOr("max_position_embeddings", default_max_position));
  ASSIGN_OR_RETURN(double eps, reader.NumberOr("rms_norm_eps", 1e-6));
  config->rms_norm_eps = static_cast<float>(eps);
  if (!(config->rms_norm_eps > 0)) return reader.Error("rms_norm_eps", "must be positive");

  const Json* rope_parameters = reader.Find("rope_parameters");  // transformers v5
  std::string_view rope_field = rope_parameters != nullptr ? "rope_parameters" : "rope_scaling";
  const Json* rope = rope_parameters != nullptr ? rope_parameters : reader.Find("rope_scaling");
  double theta = 10000.0;
  if (rope != nullptr) {
    if (!rope->is_object()) return reader.Error(rope_field, "must be an object or null");
    const JsonReader rope_reader(*rope, absl::StrCat(reader.file(), ": ", std::string(rope_field)));
    ASSIGN_OR_RETURN(config->rope_scaling, ParseRopeScaling(rope_reader, rope_field));
    ASSIGN_OR_RETURN(theta, rope_reader.NumberOr("rope_theta", theta));
  }
  ASSIGN_OR_RETURN(theta, reader.NumberOr("rope_theta", theta));
  config->rope_theta = static_cast<float>(theta);
  if (!(config->rope_theta > 1)) return reader.Error("rope_theta", "must exceed 1");

  bool sliding = config->architecture == "MistralForCausalLM";
  if (config->architecture == "Qwen2ForCausalLM") {
    ASSIGN_OR_RETURN(sliding, reader.BoolOr("use_sliding_window", false));
  }
  config->max_model_len = config->max_position_embeddings;
  if (sliding) {
    ASSIGN_OR_RETURN(std::optional<int64_t> window, reader.OptionalInt("sliding_window"));
    if (window.has_value()) {
      if (*window <= 0) return reader.Error("sliding_window", "must be positive or null");
      if (*window < config->max_position_embeddings) {
        config->sliding_window = static_cast<int>(*window);
        config->max_model_len = static_cast<int>(*window);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ParseTokenIds(const JsonReader& reader, ModelConfig* config) {
  ASSIGN_OR_RETURN(std::optional<int64_t> bos, reader.OptionalInt("bos_token_id"));
  if (bos.has_value()) config->bos_token_id = static_cast<int32_t>(*bos);
  ASSIGN_OR_RETURN(std::vector<int32_t> eos, reader.IntOrIntList("eos_token_id"));
  for (int32_t id : eos) {
    if (std::find(config->eos_token_ids.begin(), config->eos_token_ids.end(), id) ==
        config->eos_token_ids.end()) {
      config->eos_token_ids.push_back(id);
    }
  }
  return absl::OkStatus();
}

absl::Status ApplyGenerationConfig(const std::filesystem::path& path, ModelConfig* config) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return absl::OkStatus();
  ASSIGN_OR_RETURN(Json json, ReadJsonObject(path));
  const JsonReader reader(json, path.string());
  RETURN_IF_ERROR(ParseTokenIds(reader, config));
  ASSIGN_OR_RETURN(std::optional<double> temperature, reader.OptionalNumber("temperature"));
  if (temperature.has_value()) config->default_temperature = static_cast<float>(*temperature);
  ASSIGN_OR_RETURN(std::optional<double> top_p, reader.OptionalNumber("top_p"));
  if (top_p.has_value()) config->default_top_p = static_cast<float>(*top_p);
  ASSIGN_OR_RETURN(std::optional<int64_t> top_k, reader.OptionalInt("top_k"));
  if (top_k.has_value()) config->default_top_k = static_cast<int>(*top_k);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> LoadModelConfig(const std::filesystem::path& model_dir) {
  const std::filesystem::path config_path = model_dir / kConfigFile;
  absl::StatusOr<Json> json = ReadJsonObject(config_path);
  if (absl::IsNotFound(json.status())) {
    return absl::NotFoundError(absl::StrCat(config_path.string(), ": not found (is ",
                                            model_dir.string(),
                                            " a Hugging Face model directory?)"));
  }
  RETURN_IF_ERROR(json.status());
  const JsonReader reader(*json, config_path.string());

  ModelConfig config;
  const Json* architectures = reader.Find("architectures");
  if (architectures == nullptr || !architectures->is_array() || architectures->empty() ||
      !(*architectures)[0].is_string()) {
    return reader.Error("architectures", "must be a non-empty list of strings");
  }
  config.architecture = (*architectures)[0].get<std::string>();
  const ArchitectureDefaults* arch = nullptr;
  std::vector<std::string> supported;
  for (const ArchitectureDefaults& candidate : kArchitectures) {
    if (candidate.name == config.architecture) arch = &candidate;
    supported.emplace_back(candidate.name);
  }
  if (arch == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(config_path.string(), ": architectures[0] '", config.architecture,
                     "' is not supported (supported: ", absl::StrJoin(supported, ", "), ")"));
  }

  RETURN_IF_ERROR(ParseSizes(reader, &config));
  RETURN_IF_ERROR(CheckUnsupportedFeatures(reader, config));
  RETURN_IF_ERROR(ParsePositions(reader, arch->max_position_embeddings, &config));
  config.attention_bias = arch->qkv_bias;
  ASSIGN_OR_RETURN(config.tie_word_embeddings, reader.BoolOr("tie_word_embeddings", false));
  ASSIGN_OR_RETURN(config.torch_dtype, ParseTorchDtype(reader));
  ASSIGN_OR_RETURN(config.quantization, ReadCheckpointQuantization(*json, config_path));
  RETURN_IF_ERROR(ParseTokenIds(reader, &config));
  RETURN_IF_ERROR(ApplyGenerationConfig(model_dir / kGenerationConfigFile, &config));
  return config;
}

}  // namespace baton::runtime
