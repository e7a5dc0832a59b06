#include "baton/kernels/add_rms_norm.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/params/check_args.h"

namespace baton::kernels {

using internal::CheckAtLeast;
using internal::CheckPointer;

absl::Status Validate(const AddRmsNormParams& params) {
  constexpr absl::string_view kOp = "AddRmsNorm";
  RETURN_IF_ERROR(CheckAtLeast(kOp, "num_tokens", params.num_tokens, 0));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "hidden", params.hidden, 1));
  const bool empty = params.num_tokens == 0;
  RETURN_IF_ERROR(CheckPointer(kOp, "out", params.out, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "residual", params.residual, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "in", params.in, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "weight", params.weight));
  if (!empty && params.out == params.residual) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": out is residual; the updated residual stream would be overwritten"));
  }
  if (!(params.eps >= 0) || std::isinf(params.eps)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": eps = ", params.eps, " must be finite and >= 0"));
  }
  return absl::OkStatus();
}

}  // namespace baton::kernels
