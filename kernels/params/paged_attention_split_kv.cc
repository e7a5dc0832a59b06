#include "baton/kernels/paged_attention_split_kv.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/params/check_args.h"

namespace baton::kernels {

size_t PagedAttentionSplitKvWorkspaceBytes(const PagedAttentionParams& params, int num_splits) {
  return static_cast<size_t>(SplitKvLayout(params, num_splits).num_floats) * sizeof(float);
}

int PagedAttentionSplitKvNumSplits(const PagedAttentionParams& params, int num_sms) {
  const int64_t num_items = int64_t{params.num_seqs} * params.num_heads;
  if (num_sms <= 0 || num_items == 0 || num_items >= num_sms) return 1;
  const int64_t max_context_len = int64_t{params.max_blocks_per_seq} * params.cache.block_size;
  const int64_t wanted =
      (int64_t{kSplitKvTargetBlocksPerSm} * num_sms + num_items - 1) / num_items;
  const int64_t by_len = max_context_len / kSplitKvMinTokensPerSplit;
  const int64_t n = std::min({wanted, by_len, int64_t{kSplitKvMaxSplits},
                              int64_t{params.max_blocks_per_seq}});
  if (n <= 1) return 1;
  // Whole blocks per split: n splits of ceil(max_blocks / n) blocks may leave the last ones empty.
  const int64_t blocks_per_split = (params.max_blocks_per_seq + n - 1) / n;
  return static_cast<int>((params.max_blocks_per_seq + blocks_per_split - 1) / blocks_per_split);
}

absl::Status Validate(const PagedAttentionSplitKvParams& params) {
  constexpr absl::string_view kOp = "PagedAttentionSplitKv";
  RETURN_IF_ERROR(Validate(params.attn));
  const int max_splits = std::min(params.attn.max_blocks_per_seq, kSplitKvMaxSplits);
  if (params.num_splits < 1 || params.num_splits > max_splits) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": num_splits = ", params.num_splits, " is outside [1, ", max_splits,
                     "] (max_blocks_per_seq = ", params.attn.max_blocks_per_seq, ")"));
  }
  return internal::CheckPointer(kOp, "workspace", params.workspace, params.attn.num_seqs == 0);
}

}  // namespace baton::kernels
