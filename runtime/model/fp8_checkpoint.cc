#include "runtime/model/fp8_checkpoint.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "baton/kernels/matmul.h"
#include "kernels/common/status_macros.h"
#include "runtime/model/checkpoint_tensors.h"

namespace baton::runtime {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

absl::StatusOr<int> Fp8SliceGroupSize(const CheckpointQuantization& quantization, int64_t col_begin,
                                      int64_t width, const std::string& module,
                                      const std::filesystem::path& dir) {
  const int group = quantization.fp8_block_cols;
  if (group == 0) return 0;
  if (col_begin % group != 0 || width % group != 0 || group % kernels::kFp8GroupColumns != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir.string(), ": ", module, ": fp8 blocks of ", group, " columns (this rank's slice: ",
        width, " from column ", col_begin, ") cannot be read; the block's columns must be a "
        "multiple of ", kernels::kFp8GroupColumns, " that divides every rank's slice of the row"));
  }
  return group;
}

absl::Status ReadFp8Weight(const Checkpoint& checkpoint, const CheckpointQuantization& quantization,
                           const std::string& module, int64_t rows, int64_t cols,
                           const Fp8Slice& slice) {
  const std::string dir = checkpoint.dir().string();
  const std::string weight_name = module + ".weight";
  ASSIGN_OR_RETURN(const TensorInfo weight,
                   checkpoint.Get(weight_name, std::vector<int64_t>{rows, cols}));
  if (weight.dtype != DType::kF8E4M3) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, ": ", weight_name, " is ", std::string(DTypeName(weight.dtype)),
        "; quantization_config (", quantization.format, ") says fp8 (F8_E4M3)"));
  }
  const std::string scale_name = absl::StrCat(module, ".", quantization.fp8_scale_name);
  const TensorInfo* scale_info = checkpoint.Find(scale_name);
  const bool blocks = quantization.fp8_block_cols > 0;
  const int64_t block_rows = blocks ? CeilDiv(rows, quantization.fp8_block_rows) : 0;
  const int64_t block_cols = blocks ? CeilDiv(cols, quantization.fp8_block_cols) : 0;
  const int64_t count = scale_info != nullptr ? NumElements(scale_info->shape) : 0;
  // Per tensor: one element (shape [], [1] or [1, 1]); per channel: [rows] or [rows, 1]; blocks:
  // [ceil(rows / bo), ceil(cols / bi)].
  const bool shape_ok =
      scale_info != nullptr && !IsQuantized(scale_info->dtype) &&
      (blocks ? scale_info->shape == std::vector<int64_t>{block_rows, block_cols}
              : (count == 1 || (count == rows && scale_info->shape.size() <= 2 &&
                                scale_info->shape[0] == rows)));
  if (!shape_ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, ": ", scale_name, " must be a float tensor of ",
        blocks ? absl::StrCat("shape [", block_rows, ", ", block_cols, "] (one scale per ",
                              quantization.fp8_block_rows, " x ", quantization.fp8_block_cols,
                              " block)")
               : absl::StrCat("one element (per tensor) or shape [", rows, ", 1] (per channel)"),
        scale_info == nullptr ? "; it is absent"
                              : absl::StrCat("; it is ", std::string(DTypeName(scale_info->dtype)),
                                             " ", ShapeToString(scale_info->shape))));
  }
  const FloatTensor scales(*scale_info);
  const int64_t width = slice.col_end - slice.col_begin;
  const int64_t groups = slice.group_size > 0 ? width / slice.group_size : 1;
  for (int64_t r = slice.row_begin; r < slice.row_end; ++r) {
    const int64_t out_row = r - slice.row_begin;
    uint8_t* dst = slice.codes + out_row * width;
    std::memcpy(dst, weight.data + r * cols + slice.col_begin, static_cast<size_t>(width));
    for (int64_t c = 0; c < width; ++c) {
      if ((dst[c] & 0x7F) == 0x7F) {
        return absl::InvalidArgumentError(absl::StrCat(
            dir, ": ", weight_name, " holds a NaN (code 0x", absl::Hex(dst[c]), ") at [", r, ", ",
            slice.col_begin + c, "]"));
      }
    }
    for (int64_t g = 0; g < groups; ++g) {
      float value;
      if (blocks) {
        value = scales.At(r / quantization.fp8_block_rows,
                          (slice.col_begin + g * slice.group_size) / quantization.fp8_block_cols);
      } else {
        value = scales.At(0, count == 1 ? 0 : r);
      }
      slice.scales[out_row * groups + g] = value;
    }
  }
  return absl::OkStatus();
}

}  // namespace baton::runtime
