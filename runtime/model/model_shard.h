// Which part of the model one rank computes. Tensor parallelism (TP) splits every layer's
// attention heads and MLP columns over tp_size ranks (Megatron); pipeline parallelism (PP) splits
// the layers into pp_size consecutive stages. A rank is (tp_rank, pp_rank); an instance's ranks are
// numbered stage-major, rank_idx = pp_rank * tp_size + tp_rank, as scheduler/config/
// deployment_config.h documents for the device list. LlamaModel::Load takes any shard with its
// communicators (ModelComms); the engine and workers still run one rank holding the whole model.
//
// KV heads: when tp_size divides num_kv_heads, each rank holds num_kv_heads / tp_size consecutive
// KV heads. When tp_size is a multiple of num_kv_heads (tp_size > num_kv_heads), KV heads are
// replicated as vLLM does: each rank holds one KV head, and KV head h is held by the
// tp_size / num_kv_heads consecutive ranks [h * r, (h + 1) * r), r = tp_size / num_kv_heads. Query
// heads are always split num_heads / tp_size per rank, and a rank's query heads lie in the GQA
// group of its KV heads (query head q attends KV head q / (num_heads / num_kv_heads)).
//
// Vocabulary: the embedding table (first stage) and lm_head (last stage) are either replicated on
// the stage's TP ranks or vocab-parallel (Megatron, vLLM's VocabParallelEmbedding/ParallelLMHead):
// TP rank t holds the vocab rows TpVocabRange(vocab_size, tp_size, t) of both (with tied
// embeddings one slice serves both). Uneven ranges rather than vLLM's padded vocabulary: the first
// vocab_size % tp_size ranks hold one row more (see vocab_head.h for the collectives).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/model/model_config.h"

namespace baton::runtime {

// How one instance shards the model: tp_size x pp_size ranks, stage-major.
struct ParallelLayout {
  int tp_size = 1;
  int pp_size = 1;
  // [pp_size] layers per stage, each >= 1, summing to num_layers; empty: balanced
  // (StageLayerRange).
  std::vector<int> stage_num_layers;
  // Vocab-parallel embedding and lm_head over the TP ranks (see the top of this file); ignored when
  // tp_size == 1. Default true, from benchmarks/parallel/vocab_head_bench.cc (tp 2 CPU ranks,
  // `small` shape, f32): embedding + lm_head + collectives take 0.98x the replicated time for a
  // decode step of 1 sequence, 0.69x for 8, 0.75x for 32, and 0.77x for a 512-token prefill on an
  // idle 2-core machine (0.51-0.70x under load: benchmarks/README.md); never slower. The
  // lm_head product is bound by reading its weights (98 MB), and each rank reads only its half;
  // the all-gather of the logits (num_seqs x vocab floats) and the embedding's all-reduce
  // ([num_tokens, hidden], 2 us for a decode step, ~0.1 ms for 512 tokens) cost far less. Each rank
  // also keeps 1/tp of both tables (`small` at tp 2: 0.50 of the model's weight bytes per rank,
  // 0.70 replicated).
  bool vocab_parallel = true;

  int num_ranks() const { return tp_size * pp_size; }
  bool operator==(const ParallelLayout&) const = default;
};

// "tp 2 x pp 1" (with " layers 3+2" for an explicit split), for logs and errors.
std::string LayoutString(const ParallelLayout& layout);

struct ShardSpec {
  int tp_rank = 0;  // in [0, tp_size)
  int tp_size = 1;
  int pp_rank = 0;  // pipeline stage, in [0, pp_size)
  int pp_size = 1;
  // Explicit pipeline split: [pp_size] layers per stage, each >= 1, summing to num_layers. Empty:
  // balanced (see StageLayerRange).
  std::vector<int> stage_num_layers;
  bool vocab_parallel = true;  // as ParallelLayout::vocab_parallel

  bool IsWholeModel() const { return tp_size == 1 && pp_size == 1; }
  ParallelLayout layout() const { return {tp_size, pp_size, stage_num_layers, vocab_parallel}; }
  int rank_idx() const { return pp_rank * tp_size + tp_rank; }  // stage-major
};

// The spec of rank `rank_idx` of `layout`, stage-major: pp_rank = rank_idx / tp_size,
// tp_rank = rank_idx % tp_size. InvalidArgument if a size is < 1 or rank_idx is outside
// [0, num_ranks()). The layer split is copied, not validated (that needs the model:
// MakeModelShard does it).
absl::StatusOr<ShardSpec> ShardSpecOfRank(const ParallelLayout& layout, int rank_idx);

// What the rank computes, in the model's terms. The forward pass runs layers
// [layer_begin, layer_end) with this rank's heads and MLP columns. Head ranges are global head
// indices; local head i of the rank is global head head_begin + i (kv_head_begin + i for KV).
struct ModelShard {
  ShardSpec spec;
  int layer_begin = 0;
  int layer_end = 0;
  int head_begin = 0;         // this rank's query heads: [head_begin, head_end)
  int head_end = 0;
  int kv_head_begin = 0;      // this rank's KV heads: [kv_head_begin, kv_head_end)
  int kv_head_end = 0;
  int num_heads = 0;          // head_end - head_begin = config.num_heads / tp_size
  int num_kv_heads = 0;       // kv_head_end - kv_head_begin: num_kv_heads / tp_size, or 1 when
                              // replicated (tp_size > num_kv_heads)
  int intermediate_size = 0;  // this rank's MLP columns: config.intermediate_size / tp_size
  // Whether the embedding and lm_head are split over the TP ranks: spec.vocab_parallel and
  // tp_size > 1. This rank's rows of both: [vocab_begin, vocab_end), the whole [0, vocab_size)
  // when not vocab-parallel.
  bool vocab_parallel = false;
  int vocab_begin = 0;
  int vocab_end = 0;

  int num_layers() const { return layer_end - layer_begin; }
  int num_vocab_rows() const { return vocab_end - vocab_begin; }
};

// A half-open range [begin, end) of layers or heads, in global indices.
struct IndexRange {
  int begin = 0;
  int end = 0;

  int size() const { return end - begin; }
  bool operator==(const IndexRange&) const = default;
};

// The layers of pipeline stage pp_rank. Balanced when stage_num_layers is empty: split as evenly as
// possible, the first (num_layers % pp_size) stages taking one more. Otherwise stage s holds
// stage_num_layers[s] layers after those of the stages before it. InvalidArgument (naming the
// numbers) if pp_rank is outside [0, pp_size), there are more stages than layers, or the explicit
// split does not have pp_size entries, has an entry < 1, or does not sum to num_layers.
absl::StatusOr<IndexRange> StageLayerRange(int num_layers, int pp_size, int pp_rank,
                                           std::span<const int> stage_num_layers = {});

// The KV heads of tensor-parallel rank tp_rank (see the top of this file). InvalidArgument (naming
// the numbers) if num_kv_heads < 1, tp_rank is outside [0, tp_size), or tp_size neither divides
// nor is a multiple of num_kv_heads.
absl::StatusOr<IndexRange> TpKvHeadRange(int num_kv_heads, int tp_size, int tp_rank);

// The vocab rows of tensor-parallel rank tp_rank when vocab-parallel: split as evenly as possible,
// the first (vocab_size % tp_size) ranks taking one more (so ranks differ by at most one row and
// none is empty). InvalidArgument (naming the numbers) if tp_rank is outside [0, tp_size) or
// vocab_size < tp_size.
absl::StatusOr<IndexRange> TpVocabRange(int vocab_size, int tp_size, int tp_rank);

// How many tensor-parallel ranks hold each KV head: tp_size / num_kv_heads when tp_size >
// num_kv_heads, else 1. Pre-condition: TpKvHeadRange accepts (num_kv_heads, tp_size).
int KvHeadReplicas(int num_kv_heads, int tp_size);

// The rank's layers, heads and MLP columns. InvalidArgument, naming the numbers, if a rank is out
// of range, tp_size does not fit the model (num_heads % tp_size, intermediate_size % tp_size,
// tp_size neither dividing nor a multiple of num_kv_heads, num_kv_heads not dividing num_heads, or
// a rank's query heads outside its KV head's GQA group), the layer split is invalid
// (StageLayerRange), or a vocab-parallel split has fewer vocab rows than TP ranks (TpVocabRange).
absl::StatusOr<ModelShard> MakeModelShard(const ModelConfig& config, const ShardSpec& spec);

}  // namespace baton::runtime
