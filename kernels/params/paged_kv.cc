#include "baton/kernels/paged_kv.h"

#include <string>

#include "absl/strings/str_cat.h"
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
  if (!IsKvDType(view.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("PagedKvView: dtype ", std::string(DTypeName(view.dtype)),
                                                   " is not supported (f32 or bf16)"));
  }
  return absl::OkStatus();
}

}  // namespace baton::kernels
