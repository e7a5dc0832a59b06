// Reads a pre-quantized fp8 (E4M3) matmul weight — compressed-tensors float-quantized, or the
// `fp8` method's per-tensor and block-wise files, as checkpoint_quantization.h describes them —
// into the layout the kernels read (MatmulParams kF8E4M3: the codes as stored, f32 scales per row
// or per group of columns).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/model/checkpoint.h"
#include "runtime/model/checkpoint_quantization.h"

namespace baton::runtime {

// Where a slice of rows [row_begin, row_end) and columns [col_begin, col_end) of the weight goes:
// codes [rows, width] bytes; scales [rows] (group_size 0) or [rows, width / group_size] f32.
struct Fp8Slice {
  int64_t row_begin, row_end, col_begin, col_end;
  int group_size;  // the checkpoint's block columns, or 0 (a scale per row)
  uint8_t* codes;
  float* scales;
};

// The group size a slice of `width` columns starting at `col_begin` gets: 0 for per-tensor and
// per-channel scales, the block's columns for block-wise ones, or InvalidArgument when the blocks
// cannot be cut there or the kernels cannot read them (a multiple of 32 that divides the slice).
// `module` and `dir` name the weight in errors.
absl::StatusOr<int> Fp8SliceGroupSize(const CheckpointQuantization& quantization, int64_t col_begin,
                                      int64_t width, const std::string& module,
                                      const std::filesystem::path& dir);

// Reads `module`'s weight ([rows, cols]: rows output features, cols input features) into `slice`.
// InvalidArgument naming the tensor for one that is absent or of the wrong dtype or shape, for a
// scale tensor of a shape no scheme has, and for a code that is NaN (0x7F or 0xFF).
absl::Status ReadFp8Weight(const Checkpoint& checkpoint, const CheckpointQuantization& quantization,
                           const std::string& module, int64_t rows, int64_t cols,
                           const Fp8Slice& slice);

}  // namespace baton::runtime
