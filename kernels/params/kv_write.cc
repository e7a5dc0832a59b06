#include "baton/kernels/kv_write.h"

#include "kernels/common/status_macros.h"
#include "kernels/params/check_args.h"

namespace baton::kernels {

using internal::CheckAtLeast;
using internal::CheckPointer;

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
