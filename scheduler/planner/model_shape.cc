#include "scheduler/planner/model_shape.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace baton::scheduler::planner {
namespace {

// Matmul weights of one layer: q, k, v, o and the MLP (no biases, no norms).
int64_t LayerMatmulParams(const ModelShape& m) {
  const int64_t h = m.hidden_size;
  const int64_t q_width = int64_t{m.num_heads} * m.head_dim;
  const int64_t kv_width = int64_t{m.num_kv_heads} * m.head_dim;
  const int64_t attention = h * q_width + 2 * h * kv_width + q_width * h;
  const int64_t mlp_matrices = m.mlp == MlpKind::kGated ? 3 : 2;
  return attention + mlp_matrices * h * m.intermediate_size;
}

// Biases and norm parameters of one layer.
int64_t LayerVectorParams(const ModelShape& m) {
  const int64_t h = m.hidden_size;
  const int64_t qkv_bias = int64_t{m.num_heads + 2 * m.num_kv_heads} * m.head_dim;
  if (m.mlp == MlpKind::kPlain) {
    // q/k/v/o biases, fc1 and fc2 biases, two LayerNorms of weight and bias.
    return qkv_bias + h + m.intermediate_size + h + 2 * 2 * h;
  }
  return (m.attention_bias ? qkv_bias : 0) + 2 * h;  // two RMSNorms
}

// OPT's configs share vocab_size 50272, max_position_embeddings 2048, ffn_dim = 4 * hidden_size
// and tied embeddings; its learned position table has 2 extra rows (an offset kept from fairseq).
ModelShape Opt(const char* name, const char* source, int num_layers, int hidden_size,
               int num_heads) {
  return ModelShape{.name = name,
                    .source = source,
                    .num_layers = num_layers,
                    .hidden_size = hidden_size,
                    .num_heads = num_heads,
                    .num_kv_heads = num_heads,
                    .head_dim = hidden_size / num_heads,
                    .intermediate_size = 4 * hidden_size,
                    .vocab_size = 50272,
                    .max_context = 2048,
                    .mlp = MlpKind::kPlain,
                    .tie_word_embeddings = true,
                    .attention_bias = true,
                    .num_learned_positions = 2048 + 2};
}

struct GatedDims {
  int num_layers;
  int hidden_size;
  int num_heads;
  int num_kv_heads;
  int intermediate_size;
  int vocab_size;
  int max_context;
  bool attention_bias = false;
};

ModelShape Gated(const char* name, const char* source, const GatedDims& d) {
  return ModelShape{.name = name,
                    .source = source,
                    .num_layers = d.num_layers,
                    .hidden_size = d.hidden_size,
                    .num_heads = d.num_heads,
                    .num_kv_heads = d.num_kv_heads,
                    .head_dim = d.hidden_size / d.num_heads,
                    .intermediate_size = d.intermediate_size,
                    .vocab_size = d.vocab_size,
                    .max_context = d.max_context,
                    .mlp = MlpKind::kGated,
                    .tie_word_embeddings = false,
                    .attention_bias = d.attention_bias};
}

// Sorted by name. Each gated entry is its config.json's num_hidden_layers, hidden_size,
// num_attention_heads, num_key_value_heads, intermediate_size, vocab_size and
// max_position_embeddings; none sets head_dim (so hidden_size / heads) or ties its embeddings.
const std::array<ModelShape, 10>& KnownShapes() {
  static const auto* const kShapes = new std::array<ModelShape, 10>{
      Gated("llama-2-13b", "https://huggingface.co/meta-llama/Llama-2-13b-hf/blob/main/config.json",
            {40, 5120, 40, 40, 13824, 32000, 4096}),
      Gated("llama-2-70b", "https://huggingface.co/meta-llama/Llama-2-70b-hf/blob/main/config.json",
            {80, 8192, 64, 8, 28672, 32000, 4096}),
      Gated("llama-2-7b", "https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json",
            {32, 4096, 32, 32, 11008, 32000, 4096}),
      Gated("llama-3-70b",
            "https://huggingface.co/meta-llama/Meta-Llama-3-70B/blob/main/config.json",
            {80, 8192, 64, 8, 28672, 128256, 8192}),
      Gated("llama-3-8b", "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json",
            {32, 4096, 32, 8, 14336, 128256, 8192}),
      // max_position_embeddings is 32768, but attention slides over a 4096-token window and Baton
      // runs full attention only, so the runtime serves min(32768, sliding_window) = 4096
      // (runtime/model/model_config.h); the planner plans what the runtime serves.
      Gated("mistral-7b", "https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json",
            {32, 4096, 32, 8, 14336, 32000, 4096}),
      Opt("opt-13b", "https://huggingface.co/facebook/opt-13b/blob/main/config.json", 40, 5120, 40),
      Opt("opt-175b",
          "OPT paper, Zhang et al. 2022 (arXiv:2205.01068), Table 1: 96 layers, 96 heads, d_model "
          "12288; vocab and positions as facebook/opt-66b's config.json (weights not on the Hub)",
          96, 12288, 96),
      Opt("opt-66b", "https://huggingface.co/facebook/opt-66b/blob/main/config.json", 64, 9216, 72),
      // Base model (the -Instruct config says 32768); use_sliding_window is false.
      Gated("qwen2-7b", "https://huggingface.co/Qwen/Qwen2-7B/blob/main/config.json",
            {28, 3584, 28, 4, 18944, 152064, 131072, /*attention_bias=*/true}),
  };
  return *kShapes;
}

}  // namespace

int64_t ModelShape::NumParams() const {
  const int64_t h = hidden_size;
  const int64_t embeddings = int64_t{vocab_size} * h + int64_t{num_learned_positions} * h;
  const int64_t lm_head = tie_word_embeddings ? 0 : int64_t{vocab_size} * h;
  const int64_t final_norm = mlp == MlpKind::kPlain ? 2 * h : h;
  return int64_t{num_layers} * (LayerMatmulParams(*this) + LayerVectorParams(*this)) + embeddings +
         lm_head + final_norm;
}

int64_t ModelShape::KvBytesPerToken() const {
  return int64_t{2} * num_layers * num_kv_heads * head_dim * kv_bytes_per_value;
}

double ModelShape::MatmulFlopsPerToken() const {
  const double lm_head = static_cast<double>(vocab_size) * hidden_size;
  return 2.0 * (static_cast<double>(num_layers) * LayerMatmulParams(*this) + lm_head);
}

double ModelShape::AttentionFlopsPerTokenPair() const {
  // QK^T and PV: head_dim multiply-adds each per head and layer, 2 FLOPs per multiply-add.
  return 4.0 * num_layers * num_heads * head_dim;
}

std::vector<std::string> KnownModelNames() {
  std::vector<std::string> names;
  for (const ModelShape& shape : KnownShapes()) names.push_back(shape.name);
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<ModelShape> KnownModelShape(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (const ModelShape& shape : KnownShapes()) {
    if (shape.name == lower) return shape;
  }
  return absl::NotFoundError(absl::StrCat(
      "unknown model '", name, "'; known models: ", absl::StrJoin(KnownModelNames(), ", ")));
}

ModelShape ModelShapeFromConfig(const runtime::ModelConfig& config, DType weight_dtype,
                                std::string name, std::string source) {
  // The runtime loads Llama, Mistral and Qwen2 only: gated MLPs, RoPE, RMSNorm.
  return ModelShape{
      .name = std::move(name),
      .source = std::move(source),
      .num_layers = config.num_layers,
      .hidden_size = config.hidden_size,
      .num_heads = config.num_heads,
      .num_kv_heads = config.num_kv_heads,
      .head_dim = config.head_dim,
      .intermediate_size = config.intermediate_size,
      .vocab_size = config.vocab_size,
      .max_context =
          config.max_model_len > 0 ? config.max_model_len : config.max_position_embeddings,
      .mlp = MlpKind::kGated,
      .tie_word_embeddings = config.tie_word_embeddings,
      .attention_bias = config.attention_bias,
      .num_learned_positions = 0,
      .bytes_per_param = BytesPerParam(weight_dtype),
      // The runtime's default KV cache (kv_cache_dtype f32); `baton plan` sets the one it plans.
      .kv_bytes_per_value = 4,
  };
}

double BytesPerParam(DType weight_dtype) {
  if (weight_dtype == DType::kI4) return (4.0 + 2 * 32.0 / 128) / 8;
  return static_cast<double>(DTypeBits(weight_dtype)) / 8;
}

}  // namespace baton::scheduler::planner
