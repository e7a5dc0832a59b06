#include "runtime/model/model_shard.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/common/status_macros.h"

namespace baton::runtime {

std::string LayoutString(const ParallelLayout& layout) {
  std::string out = absl::StrCat("tp ", layout.tp_size, " x pp ", layout.pp_size);
  if (!layout.stage_num_layers.empty()) {
    absl::StrAppend(&out, " layers ", absl::StrJoin(layout.stage_num_layers, "+"));
  }
  if (layout.tp_size > 1 && !layout.vocab_parallel) absl::StrAppend(&out, " replicated vocab");
  return out;
}

absl::StatusOr<ShardSpec> ShardSpecOfRank(const ParallelLayout& layout, int rank_idx) {
  const int tp_size = layout.tp_size;
  const int pp_size = layout.pp_size;
  if (tp_size < 1 || pp_size < 1 || rank_idx < 0 || rank_idx >= tp_size * pp_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard: rank ", rank_idx, " of ", LayoutString(layout), " is out of range"));
  }
  return ShardSpec{.tp_rank = rank_idx % tp_size,
                   .tp_size = tp_size,
                   .pp_rank = rank_idx / tp_size,
                   .pp_size = pp_size,
                   .stage_num_layers = layout.stage_num_layers,
                   .vocab_parallel = layout.vocab_parallel};
}

absl::StatusOr<IndexRange> StageLayerRange(int num_layers, int pp_size, int pp_rank,
                                           std::span<const int> stage_num_layers) {
  if (pp_size < 1 || pp_rank < 0 || pp_rank >= pp_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard: pipeline stage ", pp_rank, " of ", pp_size, " is out of range"));
  }
  if (pp_size > num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard: ", pp_size, " pipeline stages for ", num_layers, " layers"));
  }
  if (stage_num_layers.empty()) {
    const int base = num_layers / pp_size;
    const int extra = num_layers % pp_size;
    const int begin = pp_rank * base + (pp_rank < extra ? pp_rank : extra);
    return IndexRange{begin, begin + base + (pp_rank < extra ? 1 : 0)};
  }
  const std::string split = absl::StrJoin(stage_num_layers, ", ");
  if (static_cast<int>(stage_num_layers.size()) != pp_size) {
    return absl::InvalidArgumentError(absl::StrCat("shard: layer split [", split, "] has ",
                                                   stage_num_layers.size(), " stages, pp_size is ",
                                                   pp_size));
  }
  int sum = 0;
  IndexRange range;
  for (int s = 0; s < pp_size; ++s) {
    if (stage_num_layers[s] < 1) {
      return absl::InvalidArgumentError(absl::StrCat("shard: layer split [", split, "]: stage ", s,
                                                     " has ", stage_num_layers[s],
                                                     " layers (at least 1)"));
    }
    if (s == pp_rank) range = IndexRange{sum, sum + stage_num_layers[s]};
    sum += stage_num_layers[s];
  }
  if (sum != num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("shard: layer split [", split, "] sums to ",
                                                   sum, ", the model has ", num_layers,
                                                   " layers"));
  }
  return range;
}

absl::StatusOr<IndexRange> TpKvHeadRange(int num_kv_heads, int tp_size, int tp_rank) {
  if (tp_size < 1 || tp_rank < 0 || tp_rank >= tp_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard: tp rank ", tp_rank, " of ", tp_size, " is out of range"));
  }
  if (num_kv_heads < 1) {
    return absl::InvalidArgumentError(absl::StrCat("shard: num_kv_heads ", num_kv_heads));
  }
  if (num_kv_heads % tp_size == 0) {
    const int per_rank = num_kv_heads / tp_size;
    return IndexRange{tp_rank * per_rank, (tp_rank + 1) * per_rank};
  }
  if (tp_size % num_kv_heads == 0) {  // replicated: each head on tp_size / num_kv_heads ranks
    const int head_idx = tp_rank / (tp_size / num_kv_heads);
    return IndexRange{head_idx, head_idx + 1};
  }
  return absl::InvalidArgumentError(absl::StrCat("shard: tp_size ", tp_size,
                                                 " neither divides nor is a multiple of "
                                                 "num_kv_heads ",
                                                 num_kv_heads));
}

absl::StatusOr<IndexRange> TpVocabRange(int vocab_size, int tp_size, int tp_rank) {
  if (tp_size < 1 || tp_rank < 0 || tp_rank >= tp_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard: tp rank ", tp_rank, " of ", tp_size, " is out of range"));
  }
  if (vocab_size < tp_size) {
    return absl::InvalidArgumentError(absl::StrCat("shard: vocab_size ", vocab_size,
                                                   " cannot be split over ", tp_size, " tp ranks"));
  }
  const int base = vocab_size / tp_size;
  const int extra = vocab_size % tp_size;
  const int begin = tp_rank * base + std::min(tp_rank, extra);
  return IndexRange{begin, begin + base + (tp_rank < extra ? 1 : 0)};
}

int KvHeadReplicas(int num_kv_heads, int tp_size) {
  return tp_size > num_kv_heads ? tp_size / num_kv_heads : 1;
}

absl::StatusOr<ModelShard> MakeModelShard(const ModelConfig& config, const ShardSpec& spec) {
  if (spec.tp_size < 1 || spec.tp_rank < 0 || spec.tp_rank >= spec.tp_size || spec.pp_size < 1 ||
      spec.pp_rank < 0 || spec.pp_rank >= spec.pp_size) {
    return absl::InvalidArgumentError(absl::StrCat("shard: rank (tp ", spec.tp_rank, " of ",
                                                   spec.tp_size, ", pp ", spec.pp_rank, " of ",
                                                   spec.pp_size, ") is out of range"));
  }
  if (config.num_kv_heads < 1 || config.num_heads % config.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("shard: num_kv_heads ", config.num_kv_heads,
                                                   " does not divide num_heads ",
                                                   config.num_heads));
  }
  if (config.num_heads % spec.tp_size != 0 || config.intermediate_size % spec.tp_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard: tp_size ", spec.tp_size, " does not divide num_heads ", config.num_heads,
        " and intermediate_size ", config.intermediate_size));
  }
  ASSIGN_OR_RETURN(const IndexRange kv_heads,
                   TpKvHeadRange(config.num_kv_heads, spec.tp_size, spec.tp_rank));
  ASSIGN_OR_RETURN(const IndexRange layers, StageLayerRange(config.num_layers, spec.pp_size,
                                                            spec.pp_rank, spec.stage_num_layers));
  ModelShard shard;
  shard.spec = spec;
  shard.layer_begin = layers.begin;
  shard.layer_end = layers.end;
  shard.num_heads = config.num_heads / spec.tp_size;
  shard.head_begin = spec.tp_rank * shard.num_heads;
  shard.head_end = shard.head_begin + shard.num_heads;
  shard.kv_head_begin = kv_heads.begin;
  shard.kv_head_end = kv_heads.end;
  shard.num_kv_heads = kv_heads.size();
  shard.intermediate_size = config.intermediate_size / spec.tp_size;
  shard.vocab_parallel = spec.vocab_parallel && spec.tp_size > 1;
  IndexRange vocab{0, config.vocab_size};
  if (shard.vocab_parallel) {
    ASSIGN_OR_RETURN(vocab, TpVocabRange(config.vocab_size, spec.tp_size, spec.tp_rank));
  }
  shard.vocab_begin = vocab.begin;
  shard.vocab_end = vocab.end;
  // Every query head must attend a KV head of this rank. It follows from the divisibility checks
  // above; checked here so that a change to either split cannot silently break GQA.
  const int group_size = config.num_heads / config.num_kv_heads;
  const int first_kv = shard.head_begin / group_size;
  const int last_kv = (shard.head_end - 1) / group_size;
  if (first_kv < shard.kv_head_begin || last_kv >= shard.kv_head_end) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard: tp rank ", spec.tp_rank, " of ", spec.tp_size, ": query heads [", shard.head_begin,
        ", ", shard.head_end, ") attend KV heads [", first_kv, ", ", last_kv + 1,
        "), outside its KV heads [", shard.kv_head_begin, ", ", shard.kv_head_end, ")"));
  }
  return shard;
}

}  // namespace baton::runtime
