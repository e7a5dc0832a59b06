#include "baton/kernels/paged_attention.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/params/check_args.h"

namespace baton::kernels {

using internal::CheckAtLeast;
using internal::CheckPointer;

absl::Status Validate(const PagedAttentionParams& params) {
  constexpr absl::string_view kOp = "PagedAttentionDecode";
  RETURN_IF_ERROR(Validate(params.cache));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "num_seqs", params.num_seqs, 0));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "num_heads", params.num_heads, 1));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "max_blocks_per_seq", params.max_blocks_per_seq, 1));
  if (params.num_heads % params.cache.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(kOp, ": num_heads = ", params.num_heads,
                                                   " is not a multiple of num_kv_heads = ",
                                                   params.cache.num_kv_heads));
  }
  RETURN_IF_ERROR(CheckAtLeast(kOp, "q_stride", params.q_stride,
                               int64_t{params.num_heads} * params.cache.head_dim));
  const bool empty = params.num_seqs == 0;
  RETURN_IF_ERROR(CheckPointer(kOp, "out", params.out, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "q", params.q, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "block_tables", params.block_tables, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "context_lens", params.context_lens, empty));
  if (!std::isfinite(params.scale)) {
    return absl::InvalidArgumentError(absl::StrCat(kOp, ": scale is not finite"));
  }
  return absl::OkStatus();
}

}  // namespace baton::kernels
