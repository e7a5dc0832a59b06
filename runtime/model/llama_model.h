// LlamaModel: the forward pass of the LLaMA family on the CPU backend (Llama 2/3, Mistral, Qwen2 —
// the architectures differ only in config: GQA, QKV bias, RoPE scaling, tied embeddings).
//
// Forward() runs one StepBatch: it writes every new token's K/V into the pool and returns the logits
// of each sequence's last token. Holds scratch buffers: not thread-safe, one engine thread calls it.
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/common/thread_pool.h"
#include "runtime/batch/step_batch.h"
#include "runtime/kv_cache/kv_pool.h"
#include "runtime/model/llama_weights.h"
#include "runtime/model/model_config.h"

namespace baton::runtime {

class LlamaModel {
 public:
  // Loads config.json and the safetensors of model_dir. matmul_dtype (kF32 or kBF16) is the dtype the
  // projection weights are kept in (zero-copy when the checkpoint already has it).
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Load(const std::filesystem::path& model_dir,
                                                          DType matmul_dtype, ThreadPool* pool);

  const ModelConfig& config() const { return config_; }
  DType matmul_dtype() const { return matmul_dtype_; }
  // The KV pool shape this model needs, for a given block size.
  KvPoolShape KvShape(int block_size) const;

  // Pre-condition: batch is consistent (see StepBatch) and its slots belong to kv_pool.
  // On return, (*logits) is [num_seqs, vocab_size].
  absl::Status Forward(const StepBatch& batch, const KvPool& kv_pool, std::vector<float>* logits);

 private:
  LlamaModel(ModelConfig config, std::unique_ptr<LlamaWeights> weights, DType matmul_dtype,
             ThreadPool* pool)
      : config_(std::move(config)), weights_(std::move(weights)), matmul_dtype_(matmul_dtype),
        pool_(pool) {}

  absl::Status Layer(int layer_idx, const StepBatch& batch, const KvPool& kv_pool);
  absl::Status Attention(int layer_idx, const StepBatch& batch, const KvPool& kv_pool);

  ModelConfig config_;
  std::unique_ptr<LlamaWeights> weights_;
  DType matmul_dtype_;
  ThreadPool* pool_;

  // Scratch, resized per step.
  std::vector<float> x_;       // [num_tokens, hidden] residual stream
  std::vector<float> h_;       // [num_tokens, hidden] normed input of a block
  std::vector<float> q_;       // [num_tokens, num_heads * head_dim]
  std::vector<float> k_;       // [num_tokens, num_kv_heads * head_dim]
  std::vector<float> v_;       // [num_tokens, num_kv_heads * head_dim]
  std::vector<float> attn_;    // [num_tokens, num_heads * head_dim]
  std::vector<float> gate_;    // [num_tokens, intermediate]
  std::vector<float> up_;      // [num_tokens, intermediate]
  std::vector<float> ctx_k_;   // [num_context_tokens, num_kv_heads * head_dim] gathered prefixes
  std::vector<float> ctx_v_;   // [num_context_tokens, num_kv_heads * head_dim]
  std::vector<int32_t> ctx_start_;  // [num_prefill_seqs + 1]
  std::vector<int32_t> prefill_q_start_;  // [num_prefill_seqs + 1]
  std::vector<float> inv_freq_;  // [head_dim / 2]
};

}  // namespace baton::runtime
