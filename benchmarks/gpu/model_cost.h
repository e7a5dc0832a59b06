// The work a Llama-shaped model must do per prefill and per decode step: FLOPs and bytes read, from
// the shape alone. baton_gpu_bench divides measured times into these to get shares of the measured
// roofline, and its --predict mode divides them by a card's datasheet peaks to give upper bounds.
// Header-only; benchmarks only.
//
// What is counted, and what is not (the omissions are each under 1% for the Llama-3-8B shape):
//   - matmul weights: q, k, v, o, gate, up, down of every layer, and lm_head; every decode step
//     reads each once (a batch shares the read). The embedding rows a step gathers are not counted.
//   - KV: a decode step reads the K and V of every token each sequence attends to, in the engine's
//     KV dtype (f32 in Baton's pool, bf16 in transformers' cache). Writes of the new K/V, norms and
//     activations are not counted.
//   - prefill FLOPs: 2 per matmul weight per token, one lm_head row (only the last token's logits
//     are computed), and causal attention: QK^T and PV, 2 * head_dim FLOPs each per (query, key)
//     pair, T(T+1)/2 pairs per head.
#pragma once

#include <cstdint>

namespace baton::bench {

struct LlamaShape {
  int hidden_size = 4096;
  int num_layers = 32;
  int num_heads = 32;
  int num_kv_heads = 8;
  int intermediate_size = 14336;
  int vocab_size = 128256;
  int head_dim() const { return hidden_size / num_heads; }
};

// The Llama-3-8B shape (meta-llama/Meta-Llama-3-8B config.json).
inline constexpr LlamaShape kLlama3_8B{};

// Matmul weights of one layer: q, k, v, o, gate, up, down.
inline double LayerMatmulParams(const LlamaShape& s) {
  const double h = s.hidden_size, q = double(s.num_heads) * s.head_dim(),
               kv = double(s.num_kv_heads) * s.head_dim();
  return h * q + 2 * h * kv + q * h + 3 * h * s.intermediate_size;
}

// Every matmul weight a decode step reads: all layers and lm_head (untied).
inline double DecodeMatmulParams(const LlamaShape& s) {
  return s.num_layers * LayerMatmulParams(s) + double(s.vocab_size) * s.hidden_size;
}

// K and V of one token across all layers, in elements.
inline double KvElemsPerToken(const LlamaShape& s) {
  return 2.0 * s.num_layers * s.num_kv_heads * s.head_dim();
}

// Bytes one decode step of `batch` sequences reads, each attending to `mean_context_len` tokens.
inline double DecodeBytesPerStep(const LlamaShape& s, int batch, double mean_context_len,
                                 double weight_elem_bytes, double kv_elem_bytes) {
  return DecodeMatmulParams(s) * weight_elem_bytes +
         KvElemsPerToken(s) * kv_elem_bytes * batch * mean_context_len;
}

// FLOPs of one decode step (matmuls, and attention over the context).
inline double DecodeFlopsPerStep(const LlamaShape& s, int batch, double mean_context_len) {
  return 2.0 * DecodeMatmulParams(s) * batch +
         4.0 * s.num_layers * s.num_heads * s.head_dim() * mean_context_len * batch;
}

// FLOPs of the prefill of one prompt of `prompt_len` tokens.
inline double PrefillFlops(const LlamaShape& s, int prompt_len) {
  const double t = prompt_len;
  return 2.0 * s.num_layers * LayerMatmulParams(s) * t + 2.0 * s.vocab_size * s.hidden_size +
         2.0 * s.num_layers * s.num_heads * s.head_dim() * t * (t + 1);
}

// The timed decode steps (baton::bench timing): a prompt of context_len tokens is prefilled (its
// first token sampled there), then num_steps steps each feed the last token; step j (0-based)
// attends to context_len + j + 1 tokens. The mean over the steps:
inline double MeanDecodeContext(int context_len, int num_steps) {
  return context_len + 1 + (num_steps - 1) / 2.0;
}

}  // namespace baton::bench
