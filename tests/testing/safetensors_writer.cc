#include "tests/testing/safetensors_writer.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace baton::testing {
namespace {

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t dim : shape) numel *= dim;
  return numel;
}

// FNV-1a: a stable per-name seed (std::hash may differ between standard libraries).
uint32_t NameSeed(std::string_view name) {
  uint32_t hash = 2166136261u;
  for (char c : name) hash = (hash ^ static_cast<uint8_t>(c)) * 16777619u;
  return hash;
}

}  // namespace

std::string EncodeValues(std::span<const float> values, DType dtype) {
  std::string bytes(values.size() * DTypeBytes(dtype), '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DType::kF32:
        std::memcpy(&bytes[4 * i], &values[i], 4);
        break;
      case DType::kF16: {
        const uint16_t bits = F32ToF16(values[i]);
        std::memcpy(&bytes[2 * i], &bits, 2);
        break;
      }
      case DType::kBF16: {
        const uint16_t bits = F32ToBf16(values[i]);
        std::memcpy(&bytes[2 * i], &bits, 2);
        break;
      }
      case DType::kI8:
        bytes[i] = static_cast<char>(static_cast<int8_t>(std::nearbyint(values[i])));
        break;
      case DType::kI4:  // no safetensors dtype: packed checkpoints go through AddRaw
        break;
      case DType::kF8E4M3:  // the nearest code (values are meant to be codes' values already)
        bytes[i] = static_cast<char>(F32ToFp8E4M3(values[i]));
        break;
    }
  }
  return bytes;
}

std::string SafetensorsDTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kI8:
      return "I8";
    case DType::kI4:  // none: packed checkpoints go through AddRaw
      break;
    case DType::kF8E4M3:
      return "F8_E4M3";
  }
  return "?";
}

SafetensorsWriter& SafetensorsWriter::AddRaw(std::string name, std::string dtype,
                                             std::vector<int64_t> shape, std::string bytes) {
  entries_.push_back(Entry{std::move(name), std::move(dtype), std::move(shape), std::move(bytes)});
  return *this;
}

SafetensorsWriter& SafetensorsWriter::Add(std::string name, DType dtype, std::vector<int64_t> shape,
                                          std::span<const float> values) {
  return AddRaw(std::move(name), SafetensorsDTypeName(dtype), std::move(shape),
                EncodeValues(values, dtype));
}

SafetensorsWriter& SafetensorsWriter::SetMetadata(std::string key, std::string value) {
  metadata_[std::move(key)] = std::move(value);
  return *this;
}

std::string SafetensorsWriter::Serialize() const {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  std::string data;
  for (const Entry& entry : entries_) {
    header[entry.name] = {{"dtype", entry.dtype},
                          {"shape", entry.shape},
                          {"data_offsets", {offset, offset + entry.bytes.size()}}};
    offset += entry.bytes.size();
    data += entry.bytes;
  }
  std::string header_text = header.dump();
  const size_t data_start = 8 + header_text.size();
  header_text.append((8 + data_start_remainder_ - data_start % 8) % 8, ' ');
  std::string file(8, '\0');
  const uint64_t header_bytes = header_text.size();
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((header_bytes >> (8 * i)) & 0xff);
  return file + header_text + data;
}

absl::Status SafetensorsWriter::Write(const std::filesystem::path& path) const {
  return WriteTextFile(path, Serialize());
}

absl::Status WriteTextFile(const std::filesystem::path& path, std::string_view contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat(path.string(), ": write failed"));
  return absl::OkStatus();
}

int TinyHeadDim(const TinyModelSpec& spec) { return spec.hidden_size / spec.num_heads; }

std::vector<std::pair<std::string, std::vector<int64_t>>> TinyTensorShapes(
    const TinyModelSpec& spec) {
  const int64_t hidden = spec.hidden_size;
  const int64_t q_dim = int64_t{spec.num_heads} * TinyHeadDim(spec);
  const int64_t kv_dim = int64_t{spec.num_kv_heads} * TinyHeadDim(spec);
  const int64_t inter = spec.intermediate_size;
  const bool qkv_bias = spec.architecture == "Qwen2ForCausalLM";
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  shapes.push_back({"model.embed_tokens.weight", {spec.vocab_size, hidden}});
  for (int i = 0; i < spec.num_layers; ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    shapes.push_back({p + "input_layernorm.weight", {hidden}});
    shapes.push_back({p + "self_attn.q_proj.weight", {q_dim, hidden}});
    shapes.push_back({p + "self_attn.k_proj.weight", {kv_dim, hidden}});
    shapes.push_back({p + "self_attn.v_proj.weight", {kv_dim, hidden}});
    shapes.push_back({p + "self_attn.o_proj.weight", {hidden, q_dim}});
    if (qkv_bias) {
      shapes.push_back({p + "self_attn.q_proj.bias", {q_dim}});
      shapes.push_back({p + "self_attn.k_proj.bias", {kv_dim}});
      shapes.push_back({p + "self_attn.v_proj.bias", {kv_dim}});
    }
    shapes.push_back({p + "post_attention_layernorm.weight", {hidden}});
    shapes.push_back({p + "mlp.gate_proj.weight", {inter, hidden}});
    shapes.push_back({p + "mlp.up_proj.weight", {inter, hidden}});
    shapes.push_back({p + "mlp.down_proj.weight", {hidden, inter}});
  }
  shapes.push_back({"model.norm.weight", {hidden}});
  if (!spec.tie_word_embeddings) shapes.push_back({"lm_head.weight", {spec.vocab_size, hidden}});
  return shapes;
}

float TinyValue(std::string_view name, int64_t index) {
  const uint32_t mixed = NameSeed(name) + static_cast<uint32_t>(index) * 2654435761u;
  return static_cast<float>(static_cast<int>((mixed >> 8) % 64) - 32) / 16.0f;
}

nlohmann::json TinyConfigJson(const TinyModelSpec& spec) {
  nlohmann::json config = {
      {"architectures", {spec.architecture}},
      {"hidden_size", spec.hidden_size},
      {"num_hidden_layers", spec.num_layers},
      {"num_attention_heads", spec.num_heads},
      {"num_key_value_heads", spec.num_kv_heads},
      {"intermediate_size", spec.intermediate_size},
      {"vocab_size", spec.vocab_size},
      {"max_position_embeddings", 256},
      {"rms_norm_eps", 1e-5},
      {"rope_theta", 10000.0},
      {"rope_scaling", nullptr},
      {"hidden_act", "silu"},
      {"tie_word_embeddings", spec.tie_word_embeddings},
      {"torch_dtype", spec.dtype == DType::kF32   ? "float32"
                      : spec.dtype == DType::kF16 ? "float16"
                                                  : "bfloat16"},
      {"bos_token_id", 1},
      {"eos_token_id", 2},
  };
  return config;
}

absl::Status WriteTinyWeights(const std::filesystem::path& dir, const TinyModelSpec& spec) {
  const int num_shards = std::max(1, spec.num_shards);
  std::vector<SafetensorsWriter> shards(num_shards);
  for (SafetensorsWriter& shard : shards) shard.set_data_start_remainder(spec.data_start_remainder);
  std::vector<std::string> shard_names(num_shards);
  for (int s = 0; s < num_shards; ++s) {
    shard_names[s] = num_shards == 1
                         ? "model.safetensors"
                         : absl::StrFormat("model-%05d-of-%05d.safetensors", s + 1, num_shards);
  }
  nlohmann::json weight_map = nlohmann::json::object();
  const auto shapes = TinyTensorShapes(spec);
  for (size_t t = 0; t < shapes.size(); ++t) {
    const auto& [name, hf_shape] = shapes[t];
    if (spec.omit.contains(name)) continue;
    auto override_it = spec.shape_overrides.find(name);
    const std::vector<int64_t>& shape =
        override_it == spec.shape_overrides.end() ? hf_shape : override_it->second;
    std::vector<float> values(Numel(shape));
    for (size_t i = 0; i < values.size(); ++i) values[i] = TinyValue(name, i);
    // Contiguous runs of tensors per shard, as transformers' save_pretrained splits by size.
    const int s = static_cast<int>(t * num_shards / shapes.size());
    shards[s].Add(name, spec.dtype, shape, values);
    weight_map[name] = shard_names[s];
  }
  for (int s = 0; s < num_shards; ++s) {
    if (absl::Status status = shards[s].Write(dir / shard_names[s]); !status.ok()) return status;
  }
  if (num_shards > 1) {
    const nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}};
    return WriteTextFile(dir / "model.safetensors.index.json", index.dump(2));
  }
  return absl::OkStatus();
}

absl::Status WriteScaledTinyModel(const std::filesystem::path& dir, const TinyModelSpec& spec) {
  if (absl::Status status = WriteTextFile(dir / "config.json", TinyConfigJson(spec).dump(2));
      !status.ok()) {
    return status;
  }
  SafetensorsWriter writer;
  for (const auto& [name, shape] : TinyTensorShapes(spec)) {
    const bool scaled = name.find("_proj") != std::string::npos || name == "lm_head.weight";
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    std::vector<float> values(numel);
    for (int64_t i = 0; i < numel; ++i) values[i] = TinyValue(name, i) * (scaled ? 0.125f : 1.0f);
    writer.Add(name, spec.dtype, shape, values);
  }
  return writer.Write(dir / "model.safetensors");
}

absl::Status WriteTinyModel(const std::filesystem::path& dir, const TinyModelSpec& spec) {
  if (absl::Status status = WriteTextFile(dir / "config.json", TinyConfigJson(spec).dump(2));
      !status.ok()) {
    return status;
  }
  return WriteTinyWeights(dir, spec);
}

}  // namespace baton::testing
