#include "baton/kernels/add.h"

#include "kernels/common/status_macros.h"
#include "kernels/params/check_args.h"

namespace baton::kernels {

using internal::CheckAtLeast;
using internal::CheckPointer;

absl::Status Validate(const AddParams& params) {
  constexpr absl::string_view kOp = "Add";
  RETURN_IF_ERROR(CheckAtLeast(kOp, "n", params.n, 0));
  const bool empty = params.n == 0;
  RETURN_IF_ERROR(CheckPointer(kOp, "out", params.out, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "a", params.a, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "b", params.b, empty));
  return absl::OkStatus();
}

}  // namespace baton::kernels
