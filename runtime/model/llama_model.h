// LlamaModel: the forward pass of the LLaMA family (Llama 2/3, Mistral, Qwen2 — the architectures
// differ only in config: GQA, QKV bias, RoPE scaling, tied embeddings), written once against
// DeviceBackend: every op and every copy goes through the backend, so the same code runs on any
// device that implements one (runtime/README.md, "Backends").
//
// Forward() runs one StepBatch on this rank's shard (model_shard.h): it writes every new token's
// K/V (of the rank's layers and KV heads) into the rank's pool and, on the last pipeline stage,
// returns the logits of each sequence's last token.
//
// Ranks (runtime/README.md, "Ranks"): a tp x pp instance runs one LlamaModel per rank, each on its
// own backend, KV pool and thread, and calls Forward with the same StepBatch (same block ids) on
// every rank. Tensor parallelism: the rank's q/k/v/gate/up rows and o/down columns
// (llama_weights.h); the partial [num_tokens, hidden] products of o_proj and down_proj are summed
// over the stage's TP ranks (ModelComms::tp AllReduceSum) before the residual add, so the residual
// stream is identical on the TP ranks of a stage. Pipeline parallelism: stage 0 embeds, a later
// stage receives the residual stream [num_tokens, hidden] f32 from the previous stage and a stage
// before the last sends its own to the next (ModelComms::pp Send/Recv); the last stage computes the
// final norm and the logits, the same on its TP ranks. The embedding and lm_head are replicated or
// vocab-parallel (vocab_head.h: an all-reduce after the embedding, an all-gather of the logits).
// Numerics equal the whole model's up to the order of the TP reductions.
//
// Holds scratch on the device: not thread-safe, one thread (the rank's) calls it.
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
#include "runtime/model/decode_graphs.h"
#include "runtime/model/model_shard.h"
#include "runtime/model/vocab_head.h"
#include "runtime/parallel/communicator.h"

namespace baton::runtime {

// The communicators of one rank, borrowed: they must outlive the model, and only the rank's thread
// uses them (communicator.h).
struct ModelComms {
  // The TP ranks of the rank's stage: size() == tp_size, rank() == tp_rank. Required when
  // tp_size > 1, else ignored.
  Communicator* tp = nullptr;
  // The pipeline of the rank's tp_rank (the ranks of every stage with that tp_rank):
  // size() == pp_size, rank() == pp_rank; stage s receives from s - 1 and sends to s + 1. Required
  // when pp_size > 1, else ignored.
  Communicator* pp = nullptr;
};

class LlamaModel {
 public:
  // Loads config.json and the safetensors of model_dir. matmul_dtype (kF32, kBF16 or kF16) is the
  // dtype the projection weights are kept in (zero-copy when the checkpoint already has it); `load_pool`
  // (may be nullptr) converts them. The model computes on `backend`, which must outlive it.
  // `shard_spec` picks the rank's part (only its slices are loaded); `comms` connects it to the
  // other ranks (see ModelComms). InvalidArgument (from MakeModelShard) for a shard that does not
  // fit the model; InvalidArgument for a missing communicator or one whose rank()/size() do not
  // match the shard.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Load(const std::filesystem::path& model_dir,
                                                          DType matmul_dtype,
                                                          DeviceBackend* backend,
                                                          ThreadPool* load_pool,
                                                          const ShardSpec& shard_spec = {},
                                                          ModelComms comms = {});

  const ModelConfig& config() const { return config_; }
  const ModelShard& shard() const { return shard_; }
  DType matmul_dtype() const { return matmul_dtype_; }
  // The rank's weights (its slices only).
  const LlamaWeights& weights() const { return *weights_; }
  // The KV pool shape this rank needs (its layers and kv heads), for a given block size and
  // element type (f32 or bf16).
  KvPoolShape KvShape(int block_size, DType kv_dtype = DType::kF32) const;

  // True on the pipeline's last stage, the one whose Forward answers the step.
  bool IsLastStage() const { return shard_.spec.pp_rank == shard_.spec.pp_size - 1; }

  // Pre-condition: batch is consistent (see StepBatch) and its slots belong to kv_pool, whose
  // storage the backend can address; every rank of the instance runs the same batch. On return,
  // (*out) holds each sequence's next token, drawn on the device as batch.sampling says (and the
  // logits when batch.return_logits) on the last stage, nothing on the others. Errors of the
  // communicators are returned as they are (a peer that failed aborts the group, see
  // communicator.h).
  absl::Status Forward(const StepBatch& batch, const KvPool& kv_pool, StepOutput* out);

  // Replays decode steps as device graphs (decode_graphs.h) from now on, where the backend has
  // graphs and the model is the instance's only rank; false (and nothing changes) otherwise.
  bool EnableDecodeGraphs();
  // Null unless EnableDecodeGraphs() succeeded.
  const DecodeGraphs* decode_graphs() const { return decode_graphs_.get(); }

 private:
  LlamaModel(ModelConfig config, ModelShard shard, ModelComms comms,
             std::unique_ptr<LlamaWeights> weights, DType matmul_dtype, DeviceBackend* backend);

  // A step in three parts: Stage sizes the scratch and puts the step's arrays on the device;
  // Compute enqueues its device work (and the stages' communication), which a graph may capture;
  // Collect brings the first num_seqs sequences' tokens (and logits) to the host.
  absl::Status Stage(const StepBatch& batch);
  absl::Status Compute(const StepBatch& batch, const KvPool& kv_pool);
  absl::Status Collect(int num_seqs, bool return_logits, StepOutput* out);
  // The prompt rows of batch.prompt_targets: the final norm and the logits of each (the residual
  // stream x_ of the step holds them), then its target's logprob and the top k, into
  // out->prompt_logprobs. Last stage; after Collect, as it reuses the head's scratch.
  absl::Status ScorePrompt(const StepBatch& batch, StepOutput* out);
  // A decode step through its shape's graph.
  absl::Status ForwardGraphed(const StepBatch& batch, const DecodeGraphShape& shape,
                              const KvPool& kv_pool, StepOutput* out);
  // Every device address Compute works on (scratch and staged arrays).
  std::vector<const void*> ScratchAddresses(const KvPool& kv_pool) const;
  // Adds the layer's attention and MLP to the residual stream x_. The input norm of x_ is in h_ on
  // entry, except for the shard's first layer, which computes it; every other layer leaves the next
  // layer's input norm in h_ (fused with its last residual add).
  absl::Status Layer(int layer_idx, const StepBatch& batch, const KvPool& kv_pool);
  absl::Status Attention(int layer_idx, const StepBatch& batch, const KvPool& kv_pool);
  // Sums a row-parallel product's partial out [num_tokens, hidden] over the TP ranks (a no-op when
  // tp_size == 1).
  absl::Status ReduceTp(float* out, int num_tokens);
  // The device address of a host array: the array itself when the backend computes on host
  // memory, else a copy in `staging` (grown as needed).
  template <typename T>
  absl::StatusOr<const T*> ToDevice(std::span<const T> host, DeviceBuffer& staging);

  ModelConfig config_;
  ModelShard shard_;
  ModelComms comms_;
  std::unique_ptr<LlamaWeights> weights_;
  // The weights' device copies when the backend's memory is not the host's (device_weights.h);
  // weights_ then points into them.
  std::vector<DeviceBuffer> device_weights_;
  DType matmul_dtype_;
  DeviceBackend* backend_;
  VocabHead vocab_head_;  // embedding and lm_head, over weights_ and comms_.tp
  std::unique_ptr<DecodeGraphs> decode_graphs_;  // when enabled

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
  DeviceBuffer inv_freq_;  // [head_dim / 2], copied in at Load

  // The step's index arrays as the backend sees them (host arrays on a host-memory backend, else
  // copies in the staging buffers below), set by Stage.
  struct StepArrays {
    const int32_t* positions;        // [num_tokens]
    const int32_t* slot_mapping;     // [num_tokens]
    const int32_t* context_lens;     // [num_seqs]
    const int32_t* block_tables;     // [num_seqs, max_blocks_per_seq]
    const int32_t* prefill_q_start;  // [num_prefill_seqs + 1]
    const int32_t* ctx_start;        // [num_prefill_seqs + 1]
  } step_{};
  DeviceBuffer positions_staging_;
  DeviceBuffer slot_mapping_staging_;
  DeviceBuffer context_lens_staging_;
  DeviceBuffer block_tables_staging_;
  DeviceBuffer prefill_q_start_staging_;
  DeviceBuffer ctx_start_staging_;
  // ScorePrompt's rows, gathered then normed: [2, kScoredRowsPerPass, hidden].
  static constexpr int kScoredRowsPerPass = 64;
  DeviceBuffer prompt_rows_;
  std::vector<float> scored_logits_;  // [kScoredRowsPerPass, vocab_size] on the host

  // Host-side step metadata, derived from the batch.
  std::vector<int32_t> prefill_q_start_;  // [num_prefill_seqs + 1] query rows of the prefill seqs
  std::vector<int32_t> ctx_start_;        // [num_prefill_seqs + 1] their context rows
  bool has_prefix_ = false;  // some prefill sequence has cached context (gathered per layer)
  int max_prefill_q_len_ = 0;
  int max_prefill_ctx_len_ = 0;
};

}  // namespace baton::runtime
