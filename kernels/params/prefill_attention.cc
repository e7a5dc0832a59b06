#include "baton/kernels/prefill_attention.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/params/check_args.h"

namespace baton::kernels {

using internal::CheckAtLeast;
using internal::CheckPointer;

absl::Status Validate(const PrefillAttentionParams& params) {
  constexpr absl::string_view kOp = "PrefillAttention";
  RETURN_IF_ERROR(CheckAtLeast(kOp, "num_seqs", params.num_seqs, 0));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "num_heads", params.num_heads, 1));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "num_kv_heads", params.num_kv_heads, 1));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "head_dim", params.head_dim, 1));
  if (params.num_heads % params.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(kOp, ": num_heads = ", params.num_heads,
                                                   " is not a multiple of num_kv_heads = ",
                                                   params.num_kv_heads));
  }
  RETURN_IF_ERROR(CheckAtLeast(kOp, "q_stride", params.q_stride,
                               int64_t{params.num_heads} * params.head_dim));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "kv_stride", params.kv_stride,
                               int64_t{params.num_kv_heads} * params.head_dim));
  const bool empty = params.num_seqs == 0;
  RETURN_IF_ERROR(CheckPointer(kOp, "out", params.out, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "q", params.q, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "k", params.k, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "v", params.v, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "q_start", params.q_start));
  RETURN_IF_ERROR(CheckPointer(kOp, "kv_start", params.kv_start));
  if (!std::isfinite(params.scale)) {
    return absl::InvalidArgumentError(absl::StrCat(kOp, ": scale is not finite"));
  }
  return absl::OkStatus();
}

}  // namespace baton::kernels
