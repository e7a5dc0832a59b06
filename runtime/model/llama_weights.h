// LlamaWeights: the named weights of a LLaMA-family model (Llama 2/3, Mistral, Qwen2), checked
// against its ModelConfig and laid out in the dtypes the CPU forward pass reads.
//
// Hugging Face names and the shapes required (hd = head_dim):
//   model.embed_tokens.weight                      [vocab_size, hidden_size]
//   model.layers.{i}.input_layernorm.weight        [hidden_size]
//   model.layers.{i}.self_attn.q_proj.weight       [num_heads * hd, hidden_size]
//   model.layers.{i}.self_attn.{k,v}_proj.weight   [num_kv_heads * hd, hidden_size]
//   model.layers.{i}.self_attn.o_proj.weight       [hidden_size, num_heads * hd]
//   model.layers.{i}.self_attn.{q,k,v}_proj.bias   [rows of the weight], only when attention_bias
//   model.layers.{i}.post_attention_layernorm.weight  [hidden_size]
//   model.layers.{i}.mlp.{gate,up}_proj.weight     [intermediate_size, hidden_size]
//   model.layers.{i}.mlp.down_proj.weight          [hidden_size, intermediate_size]
//   model.norm.weight                              [hidden_size]
//   lm_head.weight                                 [vocab_size, hidden_size]; not read when
//                                                  tie_word_embeddings (lm_head reuses the table)
// Tensors of other names (rotary_emb.inv_freq buffers, ...) are ignored.
//
// Dtypes after loading:
//   - norms and biases: always f32;
//   - matmul weights (q, k, v, o, gate, up, down, lm_head): matmul_dtype (kF32, kBF16, kF16, or
//     quantized at load (weight_quantization.h): kI8 per row, symmetric (QuantizeRowsInt8);
//     kF8E4M3 per row (QuantizeRowsFp8); kI4 in groups (QuantizeRowsInt4), lm_head then int8);
//   - embed_tokens: as stored if f32 or bf16, f16 converted to f32.
// A weight already stored in its target dtype is zero-copy: Weight::data points into the
// checkpoint's memory map (unless the file places it misaligned for its element size, then it is
// copied). Otherwise it is converted (round to nearest even) into aligned storage owned by
// LlamaWeights. With tied embeddings, lm_head.data == embed_tokens.data when the table's dtype is
// matmul_dtype, else lm_head is a converted copy of the table.
//
// Sharding (model_shard.h): LoadLlamaWeights keeps only a rank's part of the model. `layers` holds
// the layers [layer_begin, layer_end) of its pipeline stage (layers[i] is layer layer_begin + i);
// within a layer, Megatron's split over the TP ranks:
//   - column-parallel q/k/v (and their biases): the output rows of the rank's query / KV heads
//     ([num_heads * hd, hidden] and [num_kv_heads * hd, hidden] with the shard's head counts);
//     gate/up: the rows of its MLP columns ([intermediate, hidden], shard's intermediate);
//     a row slice is contiguous, so it stays zero-copy as above;
//   - row-parallel o_proj / down_proj: the input columns of the same heads / MLP columns
//     ([hidden, num_heads * hd], [hidden, intermediate]); a strided slice, so always a copy;
//   - embed_tokens only on the first stage, final_norm and lm_head only on the last (absent,
//     data == nullptr, elsewhere: a middle stage maps no vocabulary table at all). Replicated
//     across the stage's TP ranks, or, when shard.vocab_parallel, the rank's vocab rows
//     [vocab_begin, vocab_end) of each: lm_head [num_vocab_rows, hidden] (a row slice, zero-copy as
//     above), and embed_tokens [num_vocab_rows + 1, hidden], an owned copy of the rows followed by
//     one zero row that the ids of the other ranks' rows are mapped to (vocab_head.h). With tied
//     embeddings on a one-stage rank, lm_head then aliases the first num_vocab_rows rows of that
//     copy when the dtypes match.
// The whole tensors' names and shapes are checked as for the whole model. The checkpoint files
// stay mapped whole, but only the pages of the rank's slices are read.
//
// Errors: those of Checkpoint::Open, and of Checkpoint::Get for each tensor (kNotFound naming a
// missing tensor and the directory; kInvalidArgument for a wrong shape, naming the tensor, both
// shapes and the file); kInvalidArgument for a matmul_dtype other than kF32/kBF16/kF16/kI8/kI4/
// kF8E4M3; kUnimplemented for an int8 or fp8 tensor the checkpoint's quantization_config does not
// cover.
//
// Pre-quantized checkpoints (config.quantization, checkpoint_quantization.h): the modules it
// quantizes load as its integers and scales (kI8) whatever matmul_dtype is; the others as
// matmul_dtype, or as stored when matmul_dtype is kI8 (the checkpoint chose to keep them).
//
// Immutable after loading; share freely between threads that only read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/common/dtype.h"
#include "kernels/common/thread_pool.h"
#include "runtime/model/checkpoint.h"
#include "runtime/model/huge_page_arena.h"
#include "runtime/model/model_config.h"
#include "runtime/model/model_shard.h"

namespace baton::runtime {

struct Weight {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // row-major; empty for an absent optional weight
  const void* data = nullptr;  // [shape] elements of dtype; nullptr for an absent optional weight
  // Quantized weights only, as MatmulParams::weight_scales / weight_zeros / weight_group_size
  // (shape is then the unpacked [rows, cols]): kI8 [shape[0]] scales; kI4 [shape[0], shape[1] /
  // group_size] scales and, when not symmetric, zero points; kF8E4M3 [shape[0]] scales (group_size
  // 0) or [shape[0], shape[1] / group_size].
  const float* scales = nullptr;
  const float* zeros = nullptr;
  int group_size = 0;

  int64_t numel() const;  // 0 for an absent weight
  size_t num_bytes() const { return StorageBytes(dtype, numel()); }
  // Elements of `scales` (and of `zeros`, when present): 0 for an unquantized weight.
  int64_t num_scales() const;
};

struct LayerWeights {
  Weight input_norm;           // [hidden] f32
  Weight q_proj;               // [num_heads * head_dim, hidden] matmul dtype
  Weight k_proj;               // [num_kv_heads * head_dim, hidden] matmul dtype
  Weight v_proj;               // [num_kv_heads * head_dim, hidden] matmul dtype
  Weight o_proj;               // [hidden, num_heads * head_dim] matmul dtype
  Weight q_bias;               // [num_heads * head_dim] f32, or absent (data == nullptr)
  Weight k_bias;               // [num_kv_heads * head_dim] f32, or absent
  Weight v_bias;               // [num_kv_heads * head_dim] f32, or absent
  Weight post_attention_norm;  // [hidden] f32
  Weight gate_proj;            // [intermediate, hidden] matmul dtype
  Weight up_proj;              // [intermediate, hidden] matmul dtype
  Weight down_proj;            // [hidden, intermediate] matmul dtype
};

struct FreeDeleter {
  void operator()(void* ptr) const { std::free(ptr); }
};
// 64-byte aligned storage from std::aligned_alloc.
using OwnedBuffer = std::unique_ptr<std::byte, FreeDeleter>;
// Copies of at least this size go to LlamaWeights::arena (huge pages) instead of an OwnedBuffer:
// below it a tensor is a norm or a bias, read once per step from cache, not streamed.
inline constexpr size_t kHugePageMinBytes = size_t{1} << 20;

struct LlamaWeights {
  // [vocab_size, hidden] f32 or bf16, or [num_vocab_rows + 1, hidden] (last row zero) when
  // vocab-parallel; first stage only.
  Weight embed_tokens;
  Weight final_norm;                 // [hidden] f32; last stage only
  // [vocab_size, hidden] matmul dtype, or [num_vocab_rows, hidden] when vocab-parallel; last stage
  // only.
  Weight lm_head;
  int layer_begin = 0;               // global index of layers[0]
  std::vector<LayerWeights> layers;  // [shard num_layers]: layers [layer_begin, layer_end)

  // Storage the Weight::data pointers refer to: the memory maps and the converted copies (those of
  // at least kHugePageMinBytes in `arena`, on huge pages; smaller ones in `owned`).
  std::unique_ptr<const Checkpoint> checkpoint;
  std::vector<OwnedBuffer> owned;
  HugePageArena arena;
  size_t num_owned_bytes = 0;   // sum of the converted (or column-sliced) copies' sizes
  size_t num_mapped_bytes = 0;  // sum of the zero-copy weights' sizes (a tied lm_head aliasing the
                                // table counted once)
};

// Loads model_dir's safetensors for `config` (from LoadModelConfig on the same directory).
// Conversions run on `pool`, or on a temporary pool of the machine's cores when nullptr. `shard`
// (from MakeModelShard for the same config; nullptr: the whole model) selects the rank's slices.
absl::StatusOr<std::unique_ptr<LlamaWeights>> LoadLlamaWeights(
    const std::filesystem::path& model_dir, const ModelConfig& config, DType matmul_dtype,
    ThreadPool* pool = nullptr, const ModelShard* shard = nullptr);

// For a model that runs on the host (the CPU backend): copies every matmul weight (q, k, v, o, gate,
// up, down, lm_head) of at least kHugePageMinBytes that is still zero-copy in the checkpoint's map
// into weights.arena, repoints it, and drops the map's pages of it. Decode streams these weights
// once per step, and a file map is on 4 KiB pages only (huge_page_arena.h says what that costs).
// The bytes move from num_mapped_bytes to num_owned_bytes; resident memory stays the same. A tied
// lm_head that reads the embedding table stays where it is (the table is not streamed).
void MoveMappedMatmulWeightsToHugePages(LlamaWeights& weights);

}  // namespace baton::runtime
