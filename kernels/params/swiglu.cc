#include "baton/kernels/swiglu.h"

#include "kernels/common/status_macros.h"
#include "kernels/params/check_args.h"

namespace baton::kernels {

using internal::CheckAtLeast;
using internal::CheckPointer;

absl::Status Validate(const SwigluParams& params) {
  constexpr absl::string_view kOp = "Swiglu";
  RETURN_IF_ERROR(CheckAtLeast(kOp, "num_tokens", params.num_tokens, 0));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "intermediate", params.intermediate, 1));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "in_stride", params.in_stride, params.intermediate));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "out_stride", params.out_stride, params.intermediate));
  const bool empty = params.num_tokens == 0;
  RETURN_IF_ERROR(CheckPointer(kOp, "out", params.out, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "gate", params.gate, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "up", params.up, empty));
  return absl::OkStatus();
}

}  // namespace baton::kernels
