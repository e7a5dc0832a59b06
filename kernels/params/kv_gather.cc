#include "baton/kernels/kv_gather.h"

#include "kernels/common/status_macros.h"
#include "kernels/params/check_args.h"

namespace baton::kernels {

using internal::CheckAtLeast;
using internal::CheckPointer;

absl::Status Validate(const KvGatherParams& params) {
  constexpr absl::string_view kOp = "KvGather";
  RETURN_IF_ERROR(Validate(params.cache));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "num_seqs", params.num_seqs, 0));
  const bool empty = params.num_seqs == 0;
  RETURN_IF_ERROR(CheckPointer(kOp, "k_out", params.k_out, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "v_out", params.v_out, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "block_tables", params.block_tables, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "out_start", params.out_start, empty));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "max_blocks_per_seq", params.max_blocks_per_seq, 1));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "out_stride", params.out_stride,
                               int64_t{params.cache.num_kv_heads} * params.cache.head_dim));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "max_len", params.max_len, 0));
  return absl::OkStatus();
}

}  // namespace baton::kernels
