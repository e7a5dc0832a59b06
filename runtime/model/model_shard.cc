#include "runtime/model/model_shard.h"

#include "absl/strings/str_cat.h"

namespace baton::runtime {

absl::StatusOr<ModelShard> MakeModelShard(const ModelConfig& config, const ShardSpec& spec) {
  if (spec.tp_size < 1 || spec.tp_rank < 0 || spec.tp_rank >= spec.tp_size || spec.pp_size < 1 ||
      spec.pp_rank < 0 || spec.pp_rank >= spec.pp_size) {
    return absl::InvalidArgumentError(absl::StrCat("shard: rank (tp ", spec.tp_rank, " of ",
                                                   spec.tp_size, ", pp ", spec.pp_rank, " of ",
                                                   spec.pp_size, ") is out of range"));
  }
  if (config.num_heads % spec.tp_size != 0 || config.num_kv_heads % spec.tp_size != 0 ||
      config.intermediate_size % spec.tp_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard: tp_size ", spec.tp_size, " does not divide num_heads ", config.num_heads,
        ", num_kv_heads ", config.num_kv_heads, " and intermediate_size ",
        config.intermediate_size));
  }
  if (spec.pp_size > config.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("shard: ", spec.pp_size, " pipeline stages for ",
                                                   config.num_layers, " layers"));
  }
  const int base = config.num_layers / spec.pp_size;
  const int extra = config.num_layers % spec.pp_size;
  ModelShard shard;
  shard.spec = spec;
  shard.layer_begin = spec.pp_rank * base + (spec.pp_rank < extra ? spec.pp_rank : extra);
  shard.layer_end = shard.layer_begin + base + (spec.pp_rank < extra ? 1 : 0);
  shard.num_heads = config.num_heads / spec.tp_size;
  shard.num_kv_heads = config.num_kv_heads / spec.tp_size;
  shard.intermediate_size = config.intermediate_size / spec.tp_size;
  return shard;
}

}  // namespace baton::runtime
