// What the `baton` commands say about an instance's tp x pp ranks (runtime/README.md, "Ranks"): the
// flags that choose a layout, the check of a layout against the model's config.json before any
// process starts or any weight loads, and the one-line descriptions of what each rank holds.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/engine/model_ranks.h"
#include "runtime/model/model_config.h"
#include "runtime/model/model_shard.h"

namespace baton::cli {

// The sizes given on a command line; unset: not given.
struct ParallelFlags {
  std::optional<int> tp_size;  // --tensor-parallel-size
  std::optional<int> pp_size;  // --pipeline-parallel-size

  bool given() const { return tp_size.has_value() || pp_size.has_value(); }
};

// Adds --tensor-parallel-size and --pipeline-parallel-size (vLLM's names) to `cmd`. The values are
// checked by ParallelLayoutOf, not by CLI11, so that a bad one is the command's own one-line error
// with exit code 2 like every other bad input.
void AddParallelFlags(CLI::App& cmd, ParallelFlags* flags);

// The layout the flags ask for (1 for an absent size). InvalidArgument naming the flag for a size
// below 1.
absl::StatusOr<runtime::ParallelLayout> ParallelLayoutOf(const ParallelFlags& flags);

// Every rank's shard of `layout` on the model, stage-major, from its config alone (no weights).
// InvalidArgument naming the numbers when the layout does not fit the model (MakeModelShard: the
// heads or MLP columns do not split over tp, more stages than layers, a bad layer split).
absl::StatusOr<std::vector<runtime::ModelShard>> PlanShards(const runtime::ModelConfig& config,
                                                           const runtime::ParallelLayout& layout);

// "layers 0-2, KV heads 0-5": inclusive ranges, for people.
std::string DescribeShard(const runtime::ModelShard& shard);

// "tp 2 x pp 1: rank 0 layers 0-5, KV heads 0-2, 12.3 MiB weights; rank 1 ...": what each rank
// of a loaded instance holds.
std::string DescribeRanks(const runtime::ModelRanks& ranks);

}  // namespace baton::cli
