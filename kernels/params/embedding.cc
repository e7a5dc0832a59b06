#include "baton/kernels/embedding.h"

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/params/check_args.h"

namespace baton::kernels {

using internal::CheckAtLeast;
using internal::CheckPointer;

absl::Status Validate(const EmbeddingParams& params) {
  constexpr absl::string_view kOp = "Embedding";
  RETURN_IF_ERROR(CheckAtLeast(kOp, "num_tokens", params.num_tokens, 0));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "hidden", params.hidden, 1));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "vocab_size", params.vocab_size, 1));
  const bool empty = params.num_tokens == 0;
  RETURN_IF_ERROR(CheckPointer(kOp, "out", params.out, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "token_ids", params.token_ids, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "table", params.table));
  switch (params.table_dtype) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      return absl::OkStatus();
    case DType::kI8:
    case DType::kI4:
    case DType::kF8E4M3:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(kOp, ": unknown table_dtype ", static_cast<int>(params.table_dtype)));
}

}  // namespace baton::kernels
