#include "cli/parallel_layout.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kernels/common/status_macros.h"

namespace baton::cli {
namespace {

constexpr char kTpFlag[] = "--tensor-parallel-size";
constexpr char kPpFlag[] = "--pipeline-parallel-size";

std::string InclusiveRange(int begin, int end) {
  return end - begin == 1 ? absl::StrCat(begin) : absl::StrCat(begin, "-", end - 1);
}

}  // namespace

void AddParallelFlags(CLI::App& cmd, ParallelFlags* flags) {
  cmd.add_option(kTpFlag, flags->tp_size,
                 "Tensor-parallel ranks per instance: each holds num_heads/N query heads, its KV "
                 "heads and 1/N of the MLP (default 1)");
  cmd.add_option(kPpFlag, flags->pp_size,
                 "Pipeline stages per instance: each holds a consecutive run of layers (default 1)");
}

absl::StatusOr<runtime::ParallelLayout> ParallelLayoutOf(const ParallelFlags& flags) {
  runtime::ParallelLayout layout{.tp_size = flags.tp_size.value_or(1),
                                 .pp_size = flags.pp_size.value_or(1)};
  if (layout.tp_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(kTpFlag, ": must be >= 1, got ", layout.tp_size));
  }
  if (layout.pp_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(kPpFlag, ": must be >= 1, got ", layout.pp_size));
  }
  return layout;
}

absl::StatusOr<std::vector<runtime::ModelShard>> PlanShards(const runtime::ModelConfig& config,
                                                           const runtime::ParallelLayout& layout) {
  // Rank 0 first, built by hand: a tp or pp that does not fit fails there, before tp * pp (which
  // could overflow for absurd sizes) is computed. Once it fits, tp <= num_heads and
  // pp <= num_layers.
  auto does_not_fit = [&](const absl::Status& status) {
    return absl::Status(status.code(), absl::StrCat(runtime::LayoutString(layout),
                                                    " does not fit the model: ", status.message()));
  };
  const absl::StatusOr<runtime::ModelShard> first = runtime::MakeModelShard(
      config, runtime::ShardSpec{.tp_size = layout.tp_size,
                                 .pp_size = layout.pp_size,
                                 .stage_num_layers = layout.stage_num_layers});
  if (!first.ok()) return does_not_fit(first.status());
  std::vector<runtime::ModelShard> shards;
  for (int r = 0; r < layout.num_ranks(); ++r) {
    const absl::StatusOr<runtime::ShardSpec> spec = runtime::ShardSpecOfRank(layout, r);
    if (!spec.ok()) return does_not_fit(spec.status());
    absl::StatusOr<runtime::ModelShard> shard = runtime::MakeModelShard(config, *spec);
    if (!shard.ok()) return does_not_fit(shard.status());
    shards.push_back(*std::move(shard));
  }
  return shards;
}

std::string DescribeShard(const runtime::ModelShard& shard) {
  return absl::StrCat("layers ", InclusiveRange(shard.layer_begin, shard.layer_end), ", KV heads ",
                      InclusiveRange(shard.kv_head_begin, shard.kv_head_end));
}

std::string DescribeRanks(const runtime::ModelRanks& ranks) {
  std::vector<std::string> parts;
  for (int r = 0; r < ranks.num_ranks(); ++r) {
    const runtime::RankHoldings holdings = ranks.holdings(r);
    parts.push_back(absl::StrFormat("rank %d %s, %.1f MiB weights", r, DescribeShard(holdings.shard),
                                    static_cast<double>(holdings.weight_bytes) / (1 << 20)));
  }
  return absl::StrCat(runtime::LayoutString(ranks.layout()), ": ", absl::StrJoin(parts, "; "));
}

}  // namespace baton::cli
