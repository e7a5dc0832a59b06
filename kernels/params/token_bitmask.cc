#include "baton/kernels/token_bitmask.h"

#include "kernels/common/status_macros.h"
#include "kernels/params/check_args.h"

namespace baton::kernels {

using internal::CheckAtLeast;
using internal::CheckPointer;

absl::Status Validate(const TokenBitmaskParams& params) {
  constexpr absl::string_view kOp = "TokenBitmask";
  RETURN_IF_ERROR(CheckAtLeast(kOp, "num_masked", params.num_masked, 0));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "vocab_size", params.vocab_size, 1));
  RETURN_IF_ERROR(
      CheckAtLeast(kOp, "bitmask_words", params.bitmask_words, TokenBitmaskWordsFor(params.vocab_size)));
  const bool empty = params.num_masked == 0;
  RETURN_IF_ERROR(CheckPointer(kOp, "logits", params.logits, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "bitmask", params.bitmask, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "rows", params.rows, empty));
  return absl::OkStatus();
}

}  // namespace baton::kernels
