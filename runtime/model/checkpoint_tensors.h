// Readers of a pre-quantized checkpoint's small float tensors (scales, zero points), shared by the
// int4 and fp8 readers.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "runtime/model/checkpoint.h"

namespace baton::runtime {

// A float tensor (f32, f16 or bf16) read an element at a time (the mapping places it unaligned).
class FloatTensor {
 public:
  // The tensor `name`, which must be of exactly `shape`.
  static absl::StatusOr<FloatTensor> Find(const Checkpoint& checkpoint, const std::string& name,
                                          const std::vector<int64_t>& shape) {
    const TensorInfo* info = checkpoint.Find(name);
    if (info == nullptr || info->shape != shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          checkpoint.dir().string(), ": ", name, " must be a float tensor of shape ",
          ShapeToString(shape),
          info == nullptr ? "; it is absent" : absl::StrCat("; it is ", ShapeToString(info->shape))));
    }
    return FloatTensor(*info);
  }
  // `info`, whatever its shape (a float dtype: f32, f16 or bf16).
  explicit FloatTensor(TensorInfo info)
      : info_(std::move(info)), cols_(info_.shape.empty() ? 1 : info_.shape.back()) {}

  // Element (row, col) of a matrix; element i of anything, flat, as At(0, i).
  float At(int64_t row, int64_t col) const {
    const std::byte* p = info_.data + (row * cols_ + col) * DTypeBytes(info_.dtype);
    if (info_.dtype == DType::kF32) {
      float value;
      std::memcpy(&value, p, 4);
      return value;
    }
    uint16_t bits;
    std::memcpy(&bits, p, 2);
    return info_.dtype == DType::kBF16 ? Bf16ToF32(bits) : F16ToF32(bits);
  }
  const TensorInfo& info() const { return info_; }

 private:
  TensorInfo info_;
  int64_t cols_;
};

}  // namespace baton::runtime
