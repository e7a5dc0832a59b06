// Reads a pre-quantized int4 matmul weight (AWQ, GPTQ or compressed-tensors pack-quantized, as
// checkpoint_quantization.h describes each) into the layout the kernels read (MatmulParams kI4:
// nibbles two to a byte, a scale and a zero point per group of columns).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "runtime/model/checkpoint.h"
#include "runtime/model/checkpoint_quantization.h"

namespace baton::runtime {

// Where a slice of rows [row_begin, row_end) and columns [col_begin, col_end) of the weight goes:
// packed [rows, width / 2] bytes, scales and zeros [rows, width / group_size] f32.
struct Int4Slice {
  int64_t row_begin, row_end, col_begin, col_end;
  int group_size;  // of the slice: the checkpoint's, or width when it has one group per row
  uint8_t* packed;
  float* scales;
  float* zeros;  // may be nullptr for a symmetric layout (kPacked4), whose zero is 8
};

// The group size a slice of `width` columns starting at `col_begin` gets, or InvalidArgument when
// the checkpoint's groups cannot be cut there or the kernels cannot read them (a multiple of 32
// that divides the width). `module` and `dir` name the weight in errors.
absl::StatusOr<int> Int4SliceGroupSize(const CheckpointQuantization& quantization, int64_t cols,
                                       int64_t col_begin, int64_t width, const std::string& module,
                                       const std::filesystem::path& dir);

// Reads `module`'s weight ([rows, cols] unpacked: rows output features, cols input features) into
// `slice`. InvalidArgument naming the tensor for one that is absent or of the wrong dtype or shape,
// and for a GPTQ g_idx that is not sequential (act-order).
absl::Status ReadInt4Weight(const Checkpoint& checkpoint, const CheckpointQuantization& quantization,
                            const std::string& module, int64_t rows, int64_t cols,
                            const Int4Slice& slice);

}  // namespace baton::runtime
