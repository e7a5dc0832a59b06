#include "runtime/model/int4_checkpoint.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/model/checkpoint_tensors.h"
#include "runtime/model/weight_quantization.h"

namespace baton::runtime {
namespace {

using Layout = CheckpointQuantization::Layout;

// An I32 tensor of exactly `shape`, read a word at a time (the mapping places it unaligned).
class Int32Tensor {
 public:
  static absl::StatusOr<Int32Tensor> Find(const Checkpoint& checkpoint, const std::string& name,
                                          const std::vector<int64_t>& shape) {
    const RawTensorInfo* raw = checkpoint.FindRaw(name);
    if (raw == nullptr || raw->dtype != "I32" || raw->shape != shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          checkpoint.dir().string(), ": ", name, " must be I32 of shape ", ShapeToString(shape),
          raw == nullptr ? "; it is absent"
                         : absl::StrCat("; it is ", raw->dtype, " ", ShapeToString(raw->shape))));
    }
    return Int32Tensor(raw->data, shape.back());
  }
  uint32_t At(int64_t row, int64_t col) const {
    uint32_t word;
    std::memcpy(&word, data_ + (row * cols_ + col) * 4, 4);
    return word;
  }

 private:
  Int32Tensor(const std::byte* data, int64_t cols) : data_(data), cols_(cols) {}
  const std::byte* data_;
  int64_t cols_;
};

// AWQ's and GPTQ's per-group tensors, laid out alike: `qzeros` I32 [groups, out / 8] and `scales`
// [groups, out].
struct GroupTensors {
  Int32Tensor qzeros;
  FloatTensor scales;
};
absl::StatusOr<GroupTensors> FindGroupTensors(const Checkpoint& checkpoint,
                                              const std::string& module, int64_t groups,
                                              int64_t rows) {
  absl::StatusOr<Int32Tensor> qzeros =
      Int32Tensor::Find(checkpoint, module + ".qzeros", {groups, rows / 8});
  if (!qzeros.ok()) return qzeros.status();
  absl::StatusOr<FloatTensor> scales =
      FloatTensor::Find(checkpoint, module + ".scales", {groups, rows});
  if (!scales.ok()) return scales.status();
  return GroupTensors{*std::move(qzeros), *std::move(scales)};
}

int NibbleOf(uint32_t word, int position) { return static_cast<int>((word >> (4 * position)) & 0xF); }

// Fills `slice` from the format's accessors: nibble(r, c) the stored unsigned value of weight
// (r, c), scale(r, g) and zero(r, g) of the checkpoint's group g, w = scale * (nibble - zero).
template <typename Nibble, typename Scale, typename Zero>
void Fill(const Int4Slice& slice, int checkpoint_group, Nibble nibble, Scale scale, Zero zero) {
  const int64_t width = slice.col_end - slice.col_begin;
  const int64_t groups = width / slice.group_size;
  std::vector<uint8_t> u(width);
  for (int64_t r = slice.row_begin; r < slice.row_end; ++r) {
    const int64_t out_row = r - slice.row_begin;
    for (int64_t c = 0; c < width; ++c) u[c] = static_cast<uint8_t>(nibble(r, slice.col_begin + c));
    PackInt4Row(u.data(), width, slice.packed + out_row * (width / 2));
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t source_group = (slice.col_begin + g * slice.group_size) / checkpoint_group;
      slice.scales[out_row * groups + g] = scale(r, source_group);
      if (slice.zeros != nullptr) slice.zeros[out_row * groups + g] = zero(r, source_group);
    }
  }
}

}  // namespace

absl::StatusOr<int> Int4SliceGroupSize(const CheckpointQuantization& quantization, int64_t cols,
                                       int64_t col_begin, int64_t width, const std::string& module,
                                       const std::filesystem::path& dir) {
  const int64_t group = quantization.group_size > 0 ? quantization.group_size : width;
  if (cols % group != 0 || col_begin % group != 0 || width % group != 0 || group % 32 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir.string(), ": ", module, ": int4 groups of ", group, " columns over ", cols,
        " columns (this rank's slice: ", width, " from column ", col_begin,
        ") cannot be read; the group size must be a multiple of 32 that divides the row and "
        "every rank's slice of it"));
  }
  return static_cast<int>(group);
}

absl::Status ReadInt4Weight(const Checkpoint& checkpoint, const CheckpointQuantization& quantization,
                            const std::string& module, int64_t rows, int64_t cols,
                            const Int4Slice& slice) {
  const int64_t group = quantization.group_size > 0 ? quantization.group_size : cols;
  const int64_t groups = cols / group;
  auto dims_error = [&](const char* what) {
    return absl::InvalidArgumentError(absl::StrCat(checkpoint.dir().string(), ": ", module, ": ",
                                                   what, " must be a multiple of 8, got [", rows,
                                                   ", ", cols, "]"));
  };
  switch (quantization.layout) {
    case Layout::kPacked4: {
      if (cols % 8 != 0) return dims_error("the input features");
      absl::StatusOr<Int32Tensor> packed =
          Int32Tensor::Find(checkpoint, module + ".weight_packed", {rows, cols / 8});
      if (!packed.ok()) return packed.status();
      absl::StatusOr<FloatTensor> scale =
          FloatTensor::Find(checkpoint, module + ".weight_scale", {rows, groups});
      if (!scale.ok()) return scale.status();
      // Stored q + 8 for q in [-8, 7] and w = q * scale: the unsigned nibble minus 8, the kernels'
      // zero point when there are none (slice.zeros may be nullptr).
      Fill(slice, static_cast<int>(group),
           [&](int64_t r, int64_t c) { return NibbleOf(packed->At(r, c / 8), c % 8); },
           [&](int64_t r, int64_t g) { return scale->At(r, g); },
           [](int64_t, int64_t) { return 8.0f; });
      return absl::OkStatus();
    }
    case Layout::kAwq: {
      if (rows % 8 != 0) return dims_error("the output features");
      absl::StatusOr<Int32Tensor> qweight =
          Int32Tensor::Find(checkpoint, module + ".qweight", {cols, rows / 8});
      if (!qweight.ok()) return qweight.status();
      absl::StatusOr<GroupTensors> group_tensors = FindGroupTensors(checkpoint, module, groups, rows);
      if (!group_tensors.ok()) return group_tensors.status();
      const Int32Tensor& qzeros = group_tensors->qzeros;
      const FloatTensor& scales = group_tensors->scales;
      // Output column 8 * j + kAwqOrder[i] sits at nibble i: column t of the eight at position[t].
      int position[8];
      for (int i = 0; i < 8; ++i) position[kAwqOrder[i]] = i;
      Fill(slice, static_cast<int>(group),
           [&](int64_t r, int64_t c) { return NibbleOf(qweight->At(c, r / 8), position[r % 8]); },
           [&](int64_t r, int64_t g) { return scales.At(g, r); },
           [&](int64_t r, int64_t g) {
             return static_cast<float>(NibbleOf(qzeros.At(g, r / 8), position[r % 8]));
           });
      return absl::OkStatus();
    }
    case Layout::kGptq: {
      if (rows % 8 != 0) return dims_error("the output features");
      if (cols % 8 != 0) return dims_error("the input features");
      absl::StatusOr<Int32Tensor> qweight =
          Int32Tensor::Find(checkpoint, module + ".qweight", {cols / 8, rows});
      if (!qweight.ok()) return qweight.status();
      absl::StatusOr<GroupTensors> group_tensors = FindGroupTensors(checkpoint, module, groups, rows);
      if (!group_tensors.ok()) return group_tensors.status();
      const Int32Tensor& qzeros = group_tensors->qzeros;
      const FloatTensor& scales = group_tensors->scales;
      // g_idx (optional: GPTQModel drops it without act-order) must say what the groups say.
      if (checkpoint.FindRaw(module + ".g_idx") != nullptr) {
        absl::StatusOr<Int32Tensor> g_idx = Int32Tensor::Find(checkpoint, module + ".g_idx", {cols});
        if (!g_idx.ok()) return g_idx.status();
        for (int64_t c = 0; c < cols; ++c) {
          if (g_idx->At(0, c) != static_cast<uint32_t>(c / group)) {
            return absl::UnimplementedError(absl::StrCat(
                checkpoint.dir().string(), ": ", module, ".g_idx[", c, "] is ", g_idx->At(0, c),
                ", not ", c / group, ": act-order (desc_act) checkpoints are not supported yet"));
          }
        }
      }
      const float zero_offset = quantization.gptq_zero_minus_one ? 1.0f : 0.0f;
      Fill(slice, static_cast<int>(group),
           [&](int64_t r, int64_t c) { return NibbleOf(qweight->At(c / 8, r), c % 8); },
           [&](int64_t r, int64_t g) { return scales.At(g, r); },
           [&](int64_t r, int64_t g) {
             return static_cast<float>(NibbleOf(qzeros.At(g, r / 8), r % 8)) + zero_offset;
           });
      return absl::OkStatus();
    }
    case Layout::kInt8:
    case Layout::kPacked8:
    case Layout::kFp8:
      break;
  }
  return absl::InternalError(absl::StrCat(module, ": not an int4 layout"));
}

}  // namespace baton::runtime
