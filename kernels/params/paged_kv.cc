#include "baton/kernels/paged_kv.h"

#include "kernels/common/status_macros.h"
#include "kernels/params/check_args.h"

namespace baton::kernels {

using internal::CheckAtLeast;
using internal::CheckPointer;

absl::Status Validate(const PagedKvView& view) {
  constexpr absl::string_view kOp = "PagedKvView";
  RETURN_IF_ERROR(CheckPointer(kOp, "k", view.k));
  RETURN_IF_ERROR(CheckPointer(kOp, "v", view.v));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "block_size", view.block_size, 1));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "num_kv_heads", view.num_kv_heads, 1));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "head_dim", view.head_dim, 1));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "num_blocks", view.num_blocks, 0));
  const int64_t block_elems =
      int64_t{view.block_size} * view.num_kv_heads * view.head_dim;
  RETURN_IF_ERROR(CheckAtLeast(kOp, "block_stride", view.block_stride, block_elems));
  return absl::OkStatus();
}

absl::Status Validate(const KvWriteParams& params) {
  constexpr absl::string_view kOp = "KvWrite";
  RETURN_IF_ERROR(Validate(params.cache));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "num_tokens", params.num_tokens, 0));
  const bool empty = params.num_tokens == 0;
  RETURN_IF_ERROR(CheckPointer(kOp, "k", params.k, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "v", params.v, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "slot_mapping", params.slot_mapping, empty));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "kv_stride", params.kv_stride,
                               int64_t{params.cache.num_kv_heads} * params.cache.head_dim));
  return absl::OkStatus();
}

}  // namespace baton::kernels
