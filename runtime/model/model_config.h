// ModelConfig: the hyper-parameters of a LLaMA-family model, read from a Hugging Face model
// directory's config.json (required) and generation_config.json (optional).
//
// Supported architectures (config.json "architectures"[0]): LlamaForCausalLM (Llama 2, Llama 3.x),
// MistralForCausalLM, Qwen2ForCausalLM. Absent optional fields take transformers' defaults:
//   num_key_value_heads = num_attention_heads; head_dim = hidden_size / num_attention_heads;
//   rope_theta = 10000; rms_norm_eps = 1e-6; tie_word_embeddings = false;
//   max_position_embeddings = 2048 (Llama), 131072 (Mistral), 32768 (Qwen2);
//   torch_dtype (or its newer name "dtype") = float32; attention_bias = false (Llama), implied true
//   for Qwen2 (q/k/v have a bias, o_proj does not). Llama with attention_bias = true (which also
//   puts a bias on o_proj) is kUnimplemented.
// rope_scaling: null, {"rope_type" | "type": "default"}, "linear" {factor}, or "llama3" {factor,
// low_freq_factor, high_freq_factor, original_max_position_embeddings}; any other type is
// kUnimplemented naming it, as are hidden_act other than "silu" and mlp_bias = true.
// transformers v5's "rope_parameters" (rope_theta + the same keys) is read when present.
// Sliding window (Mistral; Qwen2 only when use_sliding_window is true): Baton runs full attention
// only, which equals sliding-window attention while a sequence is no longer than the window; so
// max_model_len = min(max_position_embeddings, sliding_window).
//
// Errors: kNotFound when config.json is missing; kInvalidArgument for malformed JSON, a missing or
// ill-typed field, an unsupported architecture, or inconsistent sizes (heads must divide
// hidden_size when head_dim is derived, kv heads must divide heads, head_dim even, all sizes
// positive); every message names the file and the field.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "baton/kernels/rope.h"
#include "kernels/common/dtype.h"
#include "runtime/model/checkpoint_quantization.h"

namespace baton::runtime {

struct ModelConfig {
  std::string architecture;  // "LlamaForCausalLM" | "MistralForCausalLM" | "Qwen2ForCausalLM"
  int hidden_size = 0;
  int num_layers = 0;         // num_hidden_layers
  int num_heads = 0;          // num_attention_heads
  int num_kv_heads = 0;       // num_key_value_heads; divides num_heads
  int head_dim = 0;           // even
  int intermediate_size = 0;  // MLP width
  int vocab_size = 0;
  int max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  float rope_theta = 10000.0f;
  kernels::RopeScaling rope_scaling;
  bool tie_word_embeddings = false;   // lm_head shares embed_tokens
  bool attention_bias = false;        // q/k/v projections carry a bias (Qwen2); o_proj never does
  std::optional<int> sliding_window;  // in tokens; set only when it is in effect
  int max_model_len = 0;  // longest sequence served: min(max_position_embeddings, sliding_window)
  DType torch_dtype = DType::kF32;  // dtype the checkpoint was saved in, per config.json
  // Set for a pre-quantized checkpoint (config.json's quantization_config, checkpoint_quantization.h):
  // its matmul weights load as int8 whatever weight dtype is asked for.
  std::optional<CheckpointQuantization> quantization;

  std::optional<int32_t> bos_token_id;
  // config.json's eos_token_id (int or list), extended by generation_config.json's; no duplicates,
  // config.json's first.
  std::vector<int32_t> eos_token_ids;
  // Sampling defaults from generation_config.json, when it sets them.
  std::optional<float> default_temperature;
  std::optional<float> default_top_p;
  std::optional<int> default_top_k;
};

// Reads model_dir/config.json and, if present, model_dir/generation_config.json.
absl::StatusOr<ModelConfig> LoadModelConfig(const std::filesystem::path& model_dir);

}  // namespace baton::runtime
