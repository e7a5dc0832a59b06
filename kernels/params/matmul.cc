#include "baton/kernels/matmul.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/params/check_args.h"

namespace baton::kernels {

using internal::CheckAtLeast;
using internal::CheckPointer;

absl::Status Validate(const MatmulParams& params) {
  constexpr absl::string_view kOp = "Matmul";
  RETURN_IF_ERROR(CheckAtLeast(kOp, "m", params.m, 0));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "n", params.n, 1));
  RETURN_IF_ERROR(CheckAtLeast(kOp, "k", params.k, 1));
  const bool empty = params.m == 0;
  RETURN_IF_ERROR(CheckPointer(kOp, "out", params.out, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "in", params.in, empty));
  RETURN_IF_ERROR(CheckPointer(kOp, "weight", params.weight));
  // Every DType is a weight dtype today; the check stays for values outside the enum.
  if (params.weight_dtype != DType::kF32 && params.weight_dtype != DType::kBF16 &&
      params.weight_dtype != DType::kF16 && params.weight_dtype != DType::kI8 &&
      params.weight_dtype != DType::kI4 && params.weight_dtype != DType::kF8E4M3) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": weight_dtype ", std::string(DTypeName(params.weight_dtype)),
        " is not supported (f32, bf16, f16, i8, i4, fp8)"));
  }
  if (IsQuantized(params.weight_dtype)) {
    RETURN_IF_ERROR(CheckPointer(kOp, "weight_scales", params.weight_scales));
  } else if (params.weight_scales != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": weight_scales given with ", std::string(DTypeName(params.weight_dtype)),
        " weights (scales belong to quantized weights only)"));
  }
  if (params.weight_dtype == DType::kI4) {
    const int g = params.weight_group_size;
    if (g <= 0 || g % kInt4ColumnBlock != 0 || params.k % g != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          kOp, ": i4 weights need a group size that is a positive multiple of ", kInt4ColumnBlock,
          " dividing k; got group size ", g, " with k ", params.k));
    }
  } else if (params.weight_dtype == DType::kF8E4M3) {
    const int g = params.weight_group_size;
    if (g < 0 || (g > 0 && (g % kFp8GroupColumns != 0 || params.k % g != 0))) {
      return absl::InvalidArgumentError(absl::StrCat(
          kOp, ": fp8 weights take group size 0 (a scale per row) or a positive multiple of ",
          kFp8GroupColumns, " dividing k; got group size ", g, " with k ", params.k));
    }
    if (params.weight_zeros != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(kOp, ": weight_zeros given with fp8 weights (they belong to i4 weights only)"));
    }
  } else if (params.weight_zeros != nullptr || params.weight_group_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": weight_zeros / weight_group_size given with ",
        std::string(DTypeName(params.weight_dtype)),
        " weights (they belong to i4 weights only, the group size to fp8 too)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateInt8Gemv(const MatmulParams& params) {
  RETURN_IF_ERROR(Validate(params));
  if (params.weight_dtype != DType::kI8) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MatmulInt8Gemv: weight_dtype ", std::string(DTypeName(params.weight_dtype)), ", not i8"));
  }
  if (params.m > kMatmulInt8GemvMaxRows) {
    return absl::InvalidArgumentError(absl::StrCat("MatmulInt8Gemv: m ", params.m, " > ",
                                                   kMatmulInt8GemvMaxRows));
  }
  return absl::OkStatus();
}

absl::Status ValidateInt4Gemv(const MatmulParams& params) {
  RETURN_IF_ERROR(Validate(params));
  if (params.weight_dtype != DType::kI4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MatmulInt4Gemv: weight_dtype ", std::string(DTypeName(params.weight_dtype)), ", not i4"));
  }
  if (params.m > kMatmulInt4GemvMaxRows) {
    return absl::InvalidArgumentError(absl::StrCat("MatmulInt4Gemv: m ", params.m, " > ",
                                                   kMatmulInt4GemvMaxRows));
  }
  return absl::OkStatus();
}

absl::Status ValidateFp8Gemv(const MatmulParams& params) {
  RETURN_IF_ERROR(Validate(params));
  if (params.weight_dtype != DType::kF8E4M3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MatmulFp8Gemv: weight_dtype ", std::string(DTypeName(params.weight_dtype)), ", not fp8"));
  }
  if (params.m > kMatmulFp8GemvMaxRows) {
    return absl::InvalidArgumentError(
        absl::StrCat("MatmulFp8Gemv: m ", params.m, " > ", kMatmulFp8GemvMaxRows));
  }
  return absl::OkStatus();
}

}  // namespace baton::kernels
