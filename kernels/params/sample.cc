#include "baton/kernels/sample.h"

#include "kernels/common/status_macros.h"
#include "kernels/params/check_args.h"

namespace baton::kernels {

using internal::CheckAtLeast;
using internal::CheckPointer;

absl::Status Validate(const SampleParams& params) {
  constexpr absl::string_view kOp = "Sample";
  RETURN_IF_ERROR(CheckAtLeast(kOp, "num_seqs", params.num_seqs, 0));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "vocab_size", params.vocab_size, 1));
  const bool empty = params.num_seqs == 0;
  RETURN_IF_ERROR(CheckPointer(kOp, "logits", params.logits, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "temperature", params.temperature, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "top_k", params.top_k, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "top_p", params.top_p, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "seed", params.seed, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "draw_idx", params.draw_idx, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "token_ids", params.token_ids, empty));
  return absl::OkStatus();
}

}  // namespace baton::kernels
