// LlamaModel: the forward pass of the LLaMA family (Llama 2/3, Mistral, Qwen2 — the architectures
// differ only in config: GQA, QKV bias, RoPE scaling, tied embeddings), written once against
// DeviceBackend: every op and every copy goes through the backend, so the same code runs on any
// device that implements one (runtime/README.md, "Backends").
//
// Forward() runs one StepBatch on this rank's shard (model_shard.h; today the whole model): it
// writes every new token's K/V into the pool and returns the logits of each sequence's last token.
// Holds scratch on the device: not thread-safe, one engine thread calls it.
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/common/thread_pool.h"
#include "runtime/backend/device_backend.h"
#include "runtime/backend/device_buffer.h"
#include "runtime/batch/step_batch.h"
#include "runtime/kv_cache/kv_pool.h"
#include "runtime/model/llama_weights.h"
#include "runtime/model/model_config.h"
#include "runtime/model/model_shard.h"

namespace baton::runtime {

class LlamaModel {
 public:
  // Loads config.json and the safetensors of model_dir. matmul_dtype (kF32 or kBF16) is the dtype the
  // projection weights are kept in (zero-copy when the checkpoint already has it); `load_pool`
  // (may be nullptr) converts them. The model computes on `backend`, which must outlive it.
  // Unimplemented for a shard other than the whole model (sharded weights and the all-reduce are
  // not written yet).
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Load(const std::filesystem::path& model_dir,
                                                          DType matmul_dtype,
                                                          DeviceBackend* backend,
                                                          ThreadPool* load_pool,
                                                          const ShardSpec& shard_spec = {});

  const ModelConfig& config() const { return config_; }
  const ModelShard& shard() const { return shard_; }
  DType matmul_dtype() const { return matmul_dtype_; }
  // The KV pool shape this rank needs (its layers and kv heads), for a given block size.
  KvPoolShape KvShape(int block_size) const;

  // Pre-condition: batch is consistent (see StepBatch) and its slots belong to kv_pool, whose
  // storage the backend can address. On return, (*logits) is [num_seqs, vocab_size] on the host.
  absl::Status Forward(const StepBatch& batch, const KvPool& kv_pool, std::vector<float>* logits);

 private:
  LlamaModel(ModelConfig config, ModelShard shard, std::unique_ptr<LlamaWeights> weights,
             DType matmul_dtype, DeviceBackend* backend);

  // Sizes the scratch for the step and makes its index arrays visible to the backend.
  absl::Status PrepareStep(const StepBatch& batch);
  absl::Status Layer(int layer_idx, const StepBatch& batch, const KvPool& kv_pool);
  absl::Status Attention(int layer_idx, const StepBatch& batch, const KvPool& kv_pool);
  // The device address of a host array: the array itself when the backend computes on host
  // memory, else a copy in `staging` (grown as needed).
  template <typename T>
  absl::StatusOr<const T*> ToDevice(std::span<const T> host, DeviceBuffer& staging);

  ModelConfig config_;
  ModelShard shard_;
  std::unique_ptr<LlamaWeights> weights_;
  DType matmul_dtype_;
  DeviceBackend* backend_;

  // Scratch on the device, grown to the largest step seen and reused.
  DeviceBuffer x_;       // [num_tokens, hidden] residual stream
  DeviceBuffer h_;       // [num_tokens, hidden] normed input of a block
  DeviceBuffer q_;       // [num_tokens, num_heads * head_dim]
  DeviceBuffer k_;       // [num_tokens, num_kv_heads * head_dim]
  DeviceBuffer v_;       // [num_tokens, num_kv_heads * head_dim]
  DeviceBuffer attn_;    // [num_tokens, num_heads * head_dim]
  DeviceBuffer gate_;    // [num_tokens, intermediate]
  DeviceBuffer up_;      // [num_tokens, intermediate]
  DeviceBuffer ctx_k_;   // [num_context_tokens, num_kv_heads * head_dim] gathered prefixes
  DeviceBuffer ctx_v_;   // [num_context_tokens, num_kv_heads * head_dim]
  DeviceBuffer logits_;  // [num_seqs, vocab_size], when the backend's memory is not the host's
  DeviceBuffer inv_freq_;  // [head_dim / 2], copied in at Load

  // The step's index arrays as the backend sees them (host arrays on a host-memory backend, else
  // copies in the staging buffers below), set by PrepareStep.
  struct StepArrays {
    const int32_t* token_ids;        // [num_tokens]
    const int32_t* positions;        // [num_tokens]
    const int32_t* slot_mapping;     // [num_tokens]
    const int32_t* context_lens;     // [num_seqs]
    const int32_t* block_tables;     // [num_seqs, max_blocks_per_seq]
    const int32_t* prefill_q_start;  // [num_prefill_seqs + 1]
    const int32_t* ctx_start;        // [num_prefill_seqs + 1]
  } step_{};
  DeviceBuffer token_ids_staging_;
  DeviceBuffer positions_staging_;
  DeviceBuffer slot_mapping_staging_;
  DeviceBuffer context_lens_staging_;
  DeviceBuffer block_tables_staging_;
  DeviceBuffer prefill_q_start_staging_;
  DeviceBuffer ctx_start_staging_;

  // Host-side step metadata, derived from the batch.
  std::vector<int32_t> prefill_q_start_;  // [num_prefill_seqs + 1] query rows of the prefill seqs
  std::vector<int32_t> ctx_start_;        // [num_prefill_seqs + 1] their context rows
  bool has_prefix_ = false;  // some prefill sequence has cached context (gathered per layer)
  int max_prefill_q_len_ = 0;
  int max_prefill_ctx_len_ = 0;
};

}  // namespace baton::runtime
