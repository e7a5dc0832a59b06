// ModelShape: what the planner needs to know about a model — its dimensions, and from them the
// bytes of its weights, the KV bytes per token and the FLOPs per token — without its weights.
//
// Two sources: a known name (KnownModelShape: the shapes of public models, each with the source of
// its numbers), or a checkpoint directory read through the runtime's own config loader
// (ModelShapeFromConfig(runtime::LoadModelConfig(dir))), so a user's model is planned exactly as
// the runtime will load it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/common/dtype.h"
#include "runtime/model/model_config.h"

namespace baton::scheduler::planner {

enum class MlpKind : uint8_t {
  kGated,  // SwiGLU (Llama, Mistral, Qwen2): gate, up and down projections
  // OPT: fc1, activation, fc2. An OPT block also has a bias on every projection and LayerNorms
  // (weight and bias), where a gated block has RMSNorms (weight only).
  kPlain,
};

struct ModelShape {
  std::string name;    // "llama-3-8b", or the directory's name
  std::string source;  // where the numbers come from (a config.json's URL, or its path)
  int num_layers = 0;
  int hidden_size = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int intermediate_size = 0;
  int vocab_size = 0;
  int max_context = 0;             // longest sequence the model serves
  MlpKind mlp = MlpKind::kGated;
  bool tie_word_embeddings = false;
  bool attention_bias = false;     // q, k and v carry a bias (Qwen2); kPlain has biases everywhere
  int num_learned_positions = 0;   // rows of a learned position table (OPT: 2 + 2048); 0: RoPE
  double bytes_per_param = 2;      // of the served weights: BytesPerParam(weight dtype)
  // Of one cached K or V value: 2 for a 16-bit KV cache (DistServe's, vLLM's, Baton's
  // kv_cache_dtype bf16), 4 for Baton's f32 default; `baton plan` sets what it plans for.
  int kv_bytes_per_value = 2;

  // Every parameter: embeddings (and learned positions), attention, MLP, biases, norms, the LM
  // head unless tied. Matches the published totals (llama-2-7b: 6,738,415,616).
  int64_t NumParams() const;
  int64_t WeightBytes() const { return static_cast<int64_t>(NumParams() * bytes_per_param); }
  // Of one activation value between ranks: as the weights', but quantized weights multiply 16-bit
  // activations.
  int ActivationBytes() const { return bytes_per_param < 2 ? 2 : static_cast<int>(bytes_per_param); }
  // K and V of every layer for one token.
  int64_t KvBytesPerToken() const;
  // Matmul FLOPs per token of a forward pass (2 per multiply-add of every layer's projections and
  // the LM head, tied or not), without attention's score and value products, the embedding and
  // position lookups, biases and norms.
  double MatmulFlopsPerToken() const;
  // Attention FLOPs of one query token against one context token, over all layers (QK^T and PV).
  double AttentionFlopsPerTokenPair() const;
};

// Bytes a served parameter of `weight_dtype` takes: its element's, plus for int4 the f32 scale and
// zero point of its group of 128 (4.5 bits in all); int8's one scale per row is left out (4 bytes
// per thousands of parameters).
double BytesPerParam(DType weight_dtype);

// The names KnownModelShape accepts, sorted.
std::vector<std::string> KnownModelNames();
// NotFound listing KnownModelNames() for anything else. Names are lower case ("llama-3-8b") and
// matched ignoring case.
absl::StatusOr<ModelShape> KnownModelShape(absl::string_view name);
// The shape of a checkpoint as the runtime loads it: weight_dtype sets bytes_per_param, and the KV
// cache is f32 (kv_bytes_per_value 4), as Baton's KV pool stores it.
ModelShape ModelShapeFromConfig(const runtime::ModelConfig& config, DType weight_dtype,
                                std::string name, std::string source);

}  // namespace baton::scheduler::planner
