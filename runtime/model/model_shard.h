// Which part of the model one rank computes. Tensor parallelism (TP) splits every layer's
// attention heads and MLP columns over tp_size ranks; pipeline parallelism (PP) splits the layers
// into pp_size consecutive stages. A rank is (tp_rank, pp_rank); today every instance is one rank holding the
// whole model (ShardSpec{}), and LlamaModel::Load accepts nothing else yet.
#pragma once

#include "absl/status/statusor.h"
#include "runtime/model/model_config.h"

namespace baton::runtime {

struct ShardSpec {
  int tp_rank = 0;  // in [0, tp_size)
  int tp_size = 1;
  int pp_rank = 0;  // pipeline stage, in [0, pp_size)
  int pp_size = 1;

  bool IsWholeModel() const { return tp_size == 1 && pp_size == 1; }
};

// What the rank computes, in the model's terms. The forward pass runs layers
// [layer_begin, layer_end) with this rank's heads and MLP columns.
struct ModelShard {
  ShardSpec spec;
  int layer_begin = 0;
  int layer_end = 0;
  int num_heads = 0;          // this rank's query heads: config.num_heads / tp_size
  int num_kv_heads = 0;       // this rank's kv heads: config.num_kv_heads / tp_size
  int intermediate_size = 0;  // this rank's MLP columns: config.intermediate_size / tp_size

  int num_layers() const { return layer_end - layer_begin; }
};

// Layers split as evenly as possible, the first (num_layers % pp_size) stages taking one more.
// InvalidArgument if a rank is out of range, tp_size does not divide the head counts and the MLP
// width, or there are more stages than layers.
absl::StatusOr<ModelShard> MakeModelShard(const ModelConfig& config, const ShardSpec& spec);

}  // namespace baton::runtime
