// Test-side writers of Hugging Face model directories, so model-loading tests build their own tiny
// checkpoints in C++ and never depend on the Python generator (scripts/).
//
// SafetensorsWriter assembles one *.safetensors file; WriteTinyModel writes a whole LLaMA-family
// directory (config.json + weights, optionally sharded with an index) whose element values are a
// known function of the tensor name and index (TinyValue), so tests can check every loaded element.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "kernels/common/dtype.h"
#include "nlohmann/json.hpp"

namespace baton::testing {

// Little-endian bytes of `values` stored as `dtype` (round to nearest even).
std::string EncodeValues(std::span<const float> values, DType dtype);
// "F32", "F16", "BF16".
std::string SafetensorsDTypeName(DType dtype);

class SafetensorsWriter {
 public:
  // A tensor with a raw payload in any safetensors dtype string ("I64", ...); `bytes` is written as
  // is, so a test may make it inconsistent with the shape on purpose.
  SafetensorsWriter& AddRaw(std::string name, std::string dtype, std::vector<int64_t> shape,
                            std::string bytes);
  // A tensor of `values` (numel of `shape` of them) stored as `dtype`.
  SafetensorsWriter& Add(std::string name, DType dtype, std::vector<int64_t> shape,
                         std::span<const float> values);
  SafetensorsWriter& SetMetadata(std::string key, std::string value);
  // Pads the header with spaces so that the data section starts at a file offset that is
  // `remainder` (0..7) modulo 8. The reference writer aligns it (0, the default); 1 misaligns every
  // tensor, for tests of unaligned data.
  SafetensorsWriter& set_data_start_remainder(int remainder) {
    data_start_remainder_ = remainder;
    return *this;
  }

  // Data are laid out in insertion order.
  std::string Serialize() const;
  absl::Status Write(const std::filesystem::path& path) const;

 private:
  struct Entry {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    std::string bytes;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
  int data_start_remainder_ = 0;
};

absl::Status WriteTextFile(const std::filesystem::path& path, std::string_view contents);

// A small LLaMA-family model. Sizes keep every weight a few hundred elements.
struct TinyModelSpec {
  std::string architecture = "LlamaForCausalLM";
  int hidden_size = 16;
  int num_layers = 2;
  int num_heads = 4;
  int num_kv_heads = 2;
  int intermediate_size = 24;
  int vocab_size = 40;
  bool tie_word_embeddings = false;
  DType dtype = DType::kF32;  // of every stored tensor
  int num_shards = 1;  // > 1: model-0000i-of-0000N.safetensors plus model.safetensors.index.json
  int data_start_remainder = 0;  // see SafetensorsWriter::set_data_start_remainder
  std::set<std::string> omit;    // tensors not written
  std::map<std::string, std::vector<int64_t>> shape_overrides;  // tensors written with this shape
};

// The model the engine, worker and forward-pass tests run: hidden 32, 2 layers, 4 query heads over
// 2 kv heads (head_dim 8), intermediate 48, vocabulary 96.
inline TinyModelSpec TinyEngineSpec() {
  TinyModelSpec spec;
  spec.hidden_size = 32;
  spec.num_layers = 2;
  spec.num_heads = 4;
  spec.num_kv_heads = 2;
  spec.intermediate_size = 48;
  spec.vocab_size = 96;
  return spec;
}

int TinyHeadDim(const TinyModelSpec& spec);
// Every tensor of the model, in a fixed order (embed, layers, norm, lm_head), with its HF shape.
// Includes q/k/v biases for Qwen2ForCausalLM and lm_head unless tie_word_embeddings.
std::vector<std::pair<std::string, std::vector<int64_t>>> TinyTensorShapes(
    const TinyModelSpec& spec);
// Element `index` of tensor `name`: a multiple of 1/16 in [-2, 2), exact in f16 and bf16.
float TinyValue(std::string_view name, int64_t index);
// config.json for the spec, as transformers writes it; tests may edit it before writing.
nlohmann::json TinyConfigJson(const TinyModelSpec& spec);
// The weights only (all of TinyTensorShapes minus `omit`, with `shape_overrides`).
absl::Status WriteTinyWeights(const std::filesystem::path& dir, const TinyModelSpec& spec);
// config.json + weights.
absl::Status WriteTinyModel(const std::filesystem::path& dir, const TinyModelSpec& spec);
// WriteTinyModel's checkpoint (spec.dtype) with the projection and lm_head weights scaled by 1/8
// (values k/128 in [-0.25, 0.25), still exact in f16 and bf16). TinyValue's raw weights (uniform
// in [-2, 2), ~50x the scale of a trained checkpoint's) make each layer amplify rounding noise, so
// a bound on rounding differences (TP sums reordered, f16 GEMMs) would test the conditioning of
// the weights rather than the code; tests of such bounds use this checkpoint.
absl::Status WriteScaledTinyModel(const std::filesystem::path& dir, const TinyModelSpec& spec);

}  // namespace baton::testing
