#include "runtime/model/llama_weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/check.h"
#include "kernels/common/status_macros.h"
#include "runtime/model/fp8_checkpoint.h"
#include "runtime/model/int4_checkpoint.h"
#include "runtime/model/weight_quantization.h"

namespace baton::runtime {
namespace {

constexpr size_t kBufferAlignment = 64;  // a cache line, and an AVX-512 register
// Below this many elements a conversion runs on the calling thread: waking the pool costs more.
constexpr int64_t kMinParallelElements = 1 << 16;

float LoadAsF32(const std::byte* src, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kF32: {
      float value;
      std::memcpy(&value, src + 4 * i, 4);
      return value;
    }
    case DType::kF16: {
      uint16_t bits;
      std::memcpy(&bits, src + 2 * i, 2);
      return F16ToF32(bits);
    }
    case DType::kBF16: {
      uint16_t bits;
      std::memcpy(&bits, src + 2 * i, 2);
      return Bf16ToF32(bits);
    }
    case DType::kI8:  // the integer; its scale is applied by whoever reads the tensor's scales
      return static_cast<float>(static_cast<int8_t>(src[i]));
    case DType::kI4:  // never stored in a checkpoint (safetensors has no 4-bit type)
      BATON_CHECK(false);
      return 0;
    case DType::kF8E4M3:  // the fp8 value; its scale is applied by whoever reads the scales
      return Fp8E4M3ToF32(static_cast<uint8_t>(src[i]));
  }
  return 0;
}

// dst[begin, end) = src[begin, end) converted from src_dtype to dst_dtype. dst is aligned for
// dst_dtype; src may be unaligned (it points into a file mapping).
void ConvertRange(const std::byte* src, DType src_dtype, std::byte* dst, DType dst_dtype,
                  int64_t begin, int64_t end) {
  if (src_dtype == dst_dtype) {
    const size_t elem_bytes = DTypeBytes(dst_dtype);
    std::memcpy(dst + begin * elem_bytes, src + begin * elem_bytes, (end - begin) * elem_bytes);
    return;
  }
  switch (dst_dtype) {
    case DType::kF32: {
      auto* out = reinterpret_cast<float*>(dst);
      for (int64_t i = begin; i < end; ++i) out[i] = LoadAsF32(src, src_dtype, i);
      return;
    }
    case DType::kBF16: {
      auto* out = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = begin; i < end; ++i) out[i] = F32ToBf16(LoadAsF32(src, src_dtype, i));
      return;
    }
    case DType::kF16: {
      auto* out = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = begin; i < end; ++i) out[i] = F32ToF16(LoadAsF32(src, src_dtype, i));
      return;
    }
    case DType::kI8:  // quantizing needs scales: weight_quantization.h, never a conversion
    case DType::kI4:
    case DType::kF8E4M3:
      BATON_CHECK(false);
      return;
  }
}

// Drops this process's pages of the checkpoint range [data, data + num_bytes) (whole pages inside
// it), after the range was copied out (a conversion, a column slice, a padded table): the model
// reads the copy, and the pages the copy read would otherwise stay resident, so a TP rank would keep
// its share of the weights plus every o_proj / down_proj it sliced (measured: 0.87 of the whole
// model's resident bytes at tp 2 instead of 0.5). The checkpoint is a read-only private file
// mapping (safetensors.cc), so a later read of those pages, if any, faults them back in from the
// file: correctness does not depend on this call, and its failure only leaves pages resident.
void ReleaseMappedRange(const std::byte* data, size_t num_bytes) {
  static const uintptr_t kPageBytes = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin =
      (reinterpret_cast<uintptr_t>(data) + kPageBytes - 1) / kPageBytes * kPageBytes;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + num_bytes) / kPageBytes * kPageBytes;
  if (begin < end) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// Loads the tensors of one checkpoint into Weights of the requested dtypes, keeping or converting.
class WeightLoader {
 public:
  WeightLoader(const Checkpoint& checkpoint, ThreadPool& pool, LlamaWeights& out)
      : checkpoint_(checkpoint), pool_(pool), out_(out) {}

  // The tensor `name` of exactly `shape`, as `target` (nullopt: as stored).
  absl::StatusOr<Weight> Load(const std::string& name, std::vector<int64_t> shape,
                              std::optional<DType> target) {
    ASSIGN_OR_RETURN(TensorInfo info, Get(name, std::move(shape)));
    return FromInfo(info, target.value_or(info.dtype));
  }

  // The tensor `name` of exactly `shape`, as stored. Int8 and fp8 tensors are refused here: they
  // are read through PreQuantized, for the modules the checkpoint's quantization_config names;
  // elsewhere, without their scales, their values mean nothing.
  absl::StatusOr<TensorInfo> Get(const std::string& name, std::vector<int64_t> shape) {
    ASSIGN_OR_RETURN(TensorInfo info, checkpoint_.Get(name, shape));
    if (IsQuantized(info.dtype)) {
      return absl::UnimplementedError(absl::StrCat(
          checkpoint_.dir().string(), ": tensor '", name, "' is stored as ",
          std::string(DTypeName(info.dtype)),
          " without a quantization_config that covers it (the formats read: "
          "runtime/model/checkpoint_quantization.h)"));
    }
    return info;
  }

  // Rows [row_begin, row_end) and columns [col_begin, col_end) of the pre-quantized matmul weight
  // of `module` ([rows, cols] unpacked), stored as `quantization` says (checkpoint_quantization.h):
  // int8 with one scale per row, or int4 in groups (int4_checkpoint.h), copied out of the
  // checkpoint.
  absl::StatusOr<Weight> PreQuantized(const CheckpointQuantization& quantization,
                                      const std::string& module, int64_t rows, int64_t cols,
                                      int64_t row_begin, int64_t row_end, int64_t col_begin,
                                      int64_t col_end) {
    const int64_t width = col_end - col_begin;
    const int64_t num_rows = row_end - row_begin;
    if (quantization.weight_dtype == DType::kF8E4M3) {
      ASSIGN_OR_RETURN(const int group, Fp8SliceGroupSize(quantization, col_begin, width, module,
                                                          checkpoint_.dir()));
      const int64_t num_scales = group > 0 ? num_rows * (width / group) : num_rows;
      const Fp8Slice slice{
          .row_begin = row_begin, .row_end = row_end, .col_begin = col_begin, .col_end = col_end,
          .group_size = group,
          .codes = reinterpret_cast<uint8_t*>(Allocate(static_cast<size_t>(num_rows * width))),
          .scales = reinterpret_cast<float*>(Allocate(static_cast<size_t>(num_scales) * 4))};
      RETURN_IF_ERROR(ReadFp8Weight(checkpoint_, quantization, module, rows, cols, slice));
      return Weight{.dtype = DType::kF8E4M3, .shape = {num_rows, width}, .data = slice.codes,
                    .scales = slice.scales, .group_size = group};
    }
    if (quantization.weight_dtype == DType::kI4) {
      ASSIGN_OR_RETURN(const int group, Int4SliceGroupSize(quantization, cols, col_begin, width,
                                                           module, checkpoint_.dir()));
      const int64_t num_scales = num_rows * (width / group);
      Int4Slice slice{
          .row_begin = row_begin, .row_end = row_end, .col_begin = col_begin, .col_end = col_end,
          .group_size = group,
          .packed = reinterpret_cast<uint8_t*>(Allocate(static_cast<size_t>(num_rows * width / 2))),
          .scales = reinterpret_cast<float*>(Allocate(static_cast<size_t>(num_scales) * 4)),
          // Symmetric (compressed-tensors): no zero points to store or read.
          .zeros = quantization.layout == CheckpointQuantization::Layout::kPacked4
                       ? nullptr
                       : reinterpret_cast<float*>(Allocate(static_cast<size_t>(num_scales) * 4))};
      RETURN_IF_ERROR(ReadInt4Weight(checkpoint_, quantization, module, rows, cols, slice));
      return Weight{.dtype = DType::kI4, .shape = {num_rows, width}, .data = slice.packed,
                    .scales = slice.scales, .zeros = slice.zeros, .group_size = group};
    }
    // The scales, [rows, 1] (or [rows]) in any float dtype.
    const std::string scale_name = module + ".weight_scale";
    const TensorInfo* scale = checkpoint_.Find(scale_name);
    if (scale == nullptr || NumElements(scale->shape) != rows ||
        (scale->shape.size() == 2 && scale->shape[1] != 1) || scale->shape.size() > 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          checkpoint_.dir().string(), ": ", scale_name, " must be a float tensor of shape [", rows,
          ", 1] (one scale per output channel)", scale == nullptr ? "; it is absent" : ""));
    }
    auto* q = reinterpret_cast<int8_t*>(Allocate(static_cast<size_t>(num_rows * width)));
    auto* scales = reinterpret_cast<float*>(Allocate(static_cast<size_t>(num_rows) * sizeof(float)));
    ConvertRange(scale->data + row_begin * DTypeBytes(scale->dtype), scale->dtype,
                 reinterpret_cast<std::byte*>(scales), DType::kF32, 0, num_rows);
    if (quantization.layout == CheckpointQuantization::Layout::kInt8) {
      ASSIGN_OR_RETURN(TensorInfo info, checkpoint_.Get(module + ".weight",
                                                        std::vector<int64_t>{rows, cols}));
      if (info.dtype != DType::kI8) {
        return absl::InvalidArgumentError(absl::StrCat(
            checkpoint_.dir().string(), ": ", module, ".weight is ",
            std::string(DTypeName(info.dtype)), "; quantization_config (", quantization.format,
            ") says int8"));
      }
      for (int64_t r = 0; r < num_rows; ++r) {
        std::memcpy(q + r * width, info.data + (row_begin + r) * cols + col_begin,
                    static_cast<size_t>(width));
      }
      ReleaseMappedRange(info.data, info.num_bytes);
    } else {
      // pack-quantized: 4 weights per little-endian I32 word, weight i at bits 8 * (i % 4), q + 128.
      const std::string packed_name = module + ".weight_packed";
      const RawTensorInfo* packed = checkpoint_.FindRaw(packed_name);
      const int64_t words = (cols + 3) / 4;
      if (packed == nullptr || packed->dtype != "I32" ||
          packed->shape != std::vector<int64_t>{rows, words}) {
        return absl::InvalidArgumentError(absl::StrCat(
            checkpoint_.dir().string(), ": ", packed_name, " must be I32 of shape [", rows, ", ",
            words, "] (pack-quantized int8)", packed == nullptr ? "; it is absent" : ""));
      }
      for (int64_t r = 0; r < num_rows; ++r) {
        const std::byte* row = packed->data + (row_begin + r) * words * 4;
        for (int64_t c = 0; c < width; ++c) {
          // Byte c of the row's words is weight c: little-endian words, 8 bits each, low first.
          const auto stored = static_cast<uint8_t>(row[col_begin + c]);
          q[r * width + c] = static_cast<int8_t>(static_cast<int>(stored) - 128);
        }
      }
      ReleaseMappedRange(packed->data, packed->num_bytes);
    }
    return Weight{.dtype = DType::kI8, .shape = {num_rows, width}, .data = q, .scales = scales};
  }

  // A matmul weight: columns [col_begin, col_end) of `info` (a matrix) as `target`, quantized per
  // row (QuantizeRowsInt8, QuantizeRowsFp8) for kI8 and kF8E4M3, per group of columns
  // (QuantizeRowsInt4) for kI4.
  absl::StatusOr<Weight> Matmul(const TensorInfo& info, DType target, int64_t col_begin,
                                int64_t col_end) {
    // int4 rows must be whole runs of 32 values (matmul.h); a weight whose rows are not (kjv-4m's
    // down_proj, 688 wide) falls back to int8, as llama.cpp falls back for its block sizes.
    if (target == DType::kI4 && Int4GroupSize(col_end - col_begin) != 0) {
      return MatmulInt4(info, col_begin, col_end);
    }
    if (target == DType::kI4) target = DType::kI8;
    if (target == DType::kI8) {
      return QuantizedPerRow(info, col_begin, col_end, DType::kI8,
                             [](const float* row, int64_t width, void* q, float* scale) {
                               QuantizeRowsInt8(row, 1, width, static_cast<int8_t*>(q), scale);
                             });
    }
    if (target == DType::kF8E4M3) {
      return QuantizedPerRow(info, col_begin, col_end, DType::kF8E4M3,
                             [](const float* row, int64_t width, void* q, float* scale) {
                               QuantizeRowsFp8(row, 1, width, static_cast<uint8_t*>(q), scale);
                             });
    }
    if (col_begin == 0 && col_end == info.shape[1]) return FromInfo(info, target);
    return ColumnSlice(info, target, col_begin, col_end);
  }

  // Columns [col_begin, col_end) of `info` as a byte per weight and a scale per row (kI8 or
  // kF8E4M3): quantize_row(row, width, q, scale) quantizes one row of f32 values.
  template <typename QuantizeRow>
  Weight QuantizedPerRow(const TensorInfo& info, int64_t col_begin, int64_t col_end, DType dtype,
                         QuantizeRow quantize_row) {
    const int64_t rows = info.shape[0];
    const int64_t cols = info.shape[1];
    const int64_t width = col_end - col_begin;
    const size_t src_elem = DTypeBytes(info.dtype);
    std::byte* q = Allocate(static_cast<size_t>(rows * width));
    auto* scales = reinterpret_cast<float*>(Allocate(static_cast<size_t>(rows) * sizeof(float)));
    auto quantize_rows = [&](int64_t row_begin, int64_t row_end) {
      std::vector<float> row(width);
      for (int64_t r = row_begin; r < row_end; ++r) {
        ConvertRange(info.data + (r * cols + col_begin) * src_elem, info.dtype,
                     reinterpret_cast<std::byte*>(row.data()), DType::kF32, 0, width);
        quantize_row(row.data(), width, q + r * width, scales + r);
      }
    };
    if (rows * width < kMinParallelElements) {
      quantize_rows(0, rows);
    } else {
      pool_.ParallelFor(rows, [&](int64_t b, int64_t e, int) { quantize_rows(b, e); });
    }
    ReleaseMappedRange(info.data, info.num_bytes);
    return Weight{.dtype = dtype, .shape = {rows, width}, .data = q, .scales = scales};
  }

  // Columns [col_begin, col_end) of `info` quantized by QuantizeRowsInt4; the width must have an
  // Int4GroupSize.
  Weight MatmulInt4(const TensorInfo& info, int64_t col_begin, int64_t col_end) {
    const int64_t rows = info.shape[0];
    const int64_t cols = info.shape[1];
    const int64_t width = col_end - col_begin;
    const int group = Int4GroupSize(width);
    const int64_t groups = width / group;
    const size_t src_elem = DTypeBytes(info.dtype);
    auto* packed = reinterpret_cast<uint8_t*>(Allocate(static_cast<size_t>(rows * width / 2)));
    auto* scales =
        reinterpret_cast<float*>(Allocate(static_cast<size_t>(rows * groups) * sizeof(float)));
    auto* zeros =
        reinterpret_cast<float*>(Allocate(static_cast<size_t>(rows * groups) * sizeof(float)));
    auto quantize_rows = [&](int64_t row_begin, int64_t row_end) {
      std::vector<float> row(width);
      for (int64_t r = row_begin; r < row_end; ++r) {
        ConvertRange(info.data + (r * cols + col_begin) * src_elem, info.dtype,
                     reinterpret_cast<std::byte*>(row.data()), DType::kF32, 0, width);
        QuantizeRowsInt4(row.data(), 1, width, group, packed + r * (width / 2),
                         scales + r * groups, zeros + r * groups);
      }
    };
    if (rows * width < kMinParallelElements) {
      quantize_rows(0, rows);
    } else {
      pool_.ParallelFor(rows, [&](int64_t b, int64_t e, int) { quantize_rows(b, e); });
    }
    ReleaseMappedRange(info.data, info.num_bytes);
    return Weight{.dtype = DType::kI4, .shape = {rows, width}, .data = packed, .scales = scales,
                  .zeros = zeros, .group_size = group};
  }

  // `info` as `target`: zero-copy when it already is and is aligned, else a converted copy.
  Weight FromInfo(const TensorInfo& info, DType target) {
    Weight weight{.dtype = target, .shape = info.shape, .data = info.data};
    if (info.dtype == target && reinterpret_cast<uintptr_t>(info.data) % DTypeBytes(target) == 0) {
      out_.num_mapped_bytes += weight.num_bytes();
      return weight;
    }
    const int64_t numel = weight.numel();
    std::byte* dst = Allocate(weight.num_bytes());
    if (numel < kMinParallelElements) {
      ConvertRange(info.data, info.dtype, dst, target, 0, numel);
    } else {
      pool_.ParallelFor(numel, [&](int64_t begin, int64_t end, int) {
        ConvertRange(info.data, info.dtype, dst, target, begin, end);
      });
    }
    ReleaseMappedRange(info.data, info.num_bytes);
    weight.data = dst;
    return weight;
  }

  // Rows [begin, end) of `info` (a matrix [rows, cols] or a vector [rows]) as `target`. A row slice
  // of a row-major tensor is contiguous: zero-copy like FromInfo when the dtype already matches.
  static TensorInfo RowSlice(const TensorInfo& info, int64_t begin, int64_t end) {
    const int64_t row_elems = info.shape.size() > 1 ? info.shape[1] : 1;
    TensorInfo slice = info;
    slice.shape[0] = end - begin;
    slice.data = info.data + begin * row_elems * DTypeBytes(info.dtype);
    slice.num_bytes = static_cast<size_t>(NumElements(slice.shape)) * DTypeBytes(info.dtype);
    return slice;
  }

  // Rows [begin, end) of the matrix `info` as `target`, followed by num_zero_rows rows of zeros:
  // always a copy, since the zero rows must follow the slice in memory.
  Weight RowsWithZeroRows(const TensorInfo& info, DType target, int64_t begin, int64_t end,
                          int64_t num_zero_rows) {
    const TensorInfo slice = RowSlice(info, begin, end);
    const int64_t cols = info.shape[1];
    const int64_t numel = (end - begin) * cols;
    const size_t dst_elem = DTypeBytes(target);
    std::byte* dst = Allocate(static_cast<size_t>(numel + num_zero_rows * cols) * dst_elem);
    if (numel < kMinParallelElements) {
      ConvertRange(slice.data, slice.dtype, dst, target, 0, numel);
    } else {
      pool_.ParallelFor(numel, [&](int64_t b, int64_t e, int) {
        ConvertRange(slice.data, slice.dtype, dst, target, b, e);
      });
    }
    std::memset(dst + numel * dst_elem, 0, static_cast<size_t>(num_zero_rows * cols) * dst_elem);
    ReleaseMappedRange(slice.data, slice.num_bytes);
    return Weight{.dtype = target, .shape = {end - begin + num_zero_rows, cols}, .data = dst};
  }

  // Columns [begin, end) of the matrix `info` [rows, cols] as `target` [rows, end - begin]: always
  // a copy, since a column slice is strided.
  Weight ColumnSlice(const TensorInfo& info, DType target, int64_t begin, int64_t end) {
    const int64_t rows = info.shape[0];
    const int64_t cols = info.shape[1];
    const int64_t width = end - begin;
    const size_t src_elem = DTypeBytes(info.dtype);
    const size_t dst_elem = DTypeBytes(target);
    std::byte* dst = Allocate(static_cast<size_t>(rows * width) * dst_elem);
    auto copy_rows = [&](int64_t row_begin, int64_t row_end) {
      for (int64_t r = row_begin; r < row_end; ++r) {
        ConvertRange(info.data + (r * cols + begin) * src_elem, info.dtype,
                     dst + r * width * dst_elem, target, 0, width);
      }
    };
    if (rows * width < kMinParallelElements) {
      copy_rows(0, rows);
    } else {
      pool_.ParallelFor(rows, [&](int64_t b, int64_t e, int) { copy_rows(b, e); });
    }
    ReleaseMappedRange(info.data, info.num_bytes);  // the copy read every row
    return Weight{.dtype = target, .shape = {rows, width}, .data = dst};
  }

 private:
  // Aligned storage of num_bytes owned by the weights, counted in num_owned_bytes. Large copies
  // (the matmul weights decode streams) go on huge pages (huge_page_arena.h).
  std::byte* Allocate(size_t num_bytes) {
    if (num_bytes >= kHugePageMinBytes) {
      std::byte* dst = out_.arena.Allocate(num_bytes);
      BATON_CHECK(dst != nullptr);
      out_.num_owned_bytes += num_bytes;
      return dst;
    }
    const size_t alloc_bytes = std::max<size_t>(
        kBufferAlignment, (num_bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment);
    OwnedBuffer buffer(static_cast<std::byte*>(std::aligned_alloc(kBufferAlignment, alloc_bytes)));
    BATON_CHECK(buffer != nullptr);
    std::byte* dst = buffer.get();
    out_.owned.push_back(std::move(buffer));
    out_.num_owned_bytes += num_bytes;
    return dst;
  }

  const Checkpoint& checkpoint_;
  ThreadPool& pool_;
  LlamaWeights& out_;
};

// Layer `layer_idx`, keeping only `shard`'s slices: q/k/v rows (and biases) of its query and KV
// heads, gate/up rows of its MLP columns, o_proj/down_proj columns of the same (Megatron). The whole
// tensors' shapes are checked as without sharding.
absl::StatusOr<LayerWeights> LoadLayer(WeightLoader& loader, const ModelConfig& config,
                                       const ModelShard& shard, int layer_idx,
                                       DType matmul_dtype) {
  const std::string prefix = absl::StrCat("model.layers.", layer_idx, ".");
  const int64_t hidden = config.hidden_size;
  const int64_t hd = config.head_dim;
  const int64_t q_dim = int64_t{config.num_heads} * hd;
  const int64_t kv_dim = int64_t{config.num_kv_heads} * hd;
  const int64_t inter = config.intermediate_size;
  const int64_t q_begin = shard.head_begin * hd, q_end = shard.head_end * hd;
  const int64_t kv_begin = shard.kv_head_begin * hd, kv_end = shard.kv_head_end * hd;
  const int64_t mlp_begin = int64_t{shard.spec.tp_rank} * shard.intermediate_size;
  const int64_t mlp_end = mlp_begin + shard.intermediate_size;
  auto get = [&](std::string_view name, std::vector<int64_t> shape) {
    return loader.Get(prefix + std::string(name), std::move(shape));
  };
  // Rows [begin, end) of a tensor of `shape`, as `target`.
  auto rows = [&](std::string_view name, std::vector<int64_t> shape, DType target, int64_t begin,
                  int64_t end) -> absl::StatusOr<Weight> {
    ASSIGN_OR_RETURN(TensorInfo info, get(name, std::move(shape)));
    return loader.FromInfo(WeightLoader::RowSlice(info, begin, end), target);
  };
  // A pre-quantized checkpoint's modules load as it stores them; the others as matmul_dtype, or
  // as stored when that is i8 and the checkpoint left them unquantized (its `ignore`).
  const std::optional<CheckpointQuantization>& quantization = config.quantization;
  auto module_of = [&](std::string_view name) {
    return prefix + std::string(name.substr(0, name.size() - std::string_view(".weight").size()));
  };
  auto pre_quantized = [&](std::string_view name) {
    return quantization.has_value() && quantization->Quantizes(module_of(name));
  };
  auto float_target = [&](const TensorInfo& info) {
    return quantization.has_value() && IsQuantized(matmul_dtype) ? info.dtype : matmul_dtype;
  };
  // Rows [begin, end) of a [rows, hidden] matmul weight.
  auto matmul_rows = [&](std::string_view name, int64_t num_rows, int64_t begin,
                         int64_t end) -> absl::StatusOr<Weight> {
    if (pre_quantized(name)) {
      return loader.PreQuantized(*quantization, module_of(name), num_rows, hidden, begin, end, 0,
                                 hidden);
    }
    ASSIGN_OR_RETURN(TensorInfo info, get(name, {num_rows, hidden}));
    return loader.Matmul(WeightLoader::RowSlice(info, begin, end), float_target(info), 0, hidden);
  };
  // Columns [begin, end) of a [hidden, cols] matmul weight.
  auto columns = [&](std::string_view name, int64_t cols, int64_t begin,
                     int64_t end) -> absl::StatusOr<Weight> {
    if (pre_quantized(name)) {
      return loader.PreQuantized(*quantization, module_of(name), hidden, cols, 0, hidden, begin,
                                 end);
    }
    ASSIGN_OR_RETURN(TensorInfo info, get(name, {hidden, cols}));
    return loader.Matmul(info, float_target(info), begin, end);
  };
  auto f32 = [&](std::string_view name, std::vector<int64_t> shape) {
    return loader.Load(prefix + std::string(name), std::move(shape), DType::kF32);
  };

  LayerWeights layer;
  ASSIGN_OR_RETURN(layer.input_norm, f32("input_layernorm.weight", {hidden}));
  ASSIGN_OR_RETURN(layer.q_proj, matmul_rows("self_attn.q_proj.weight", q_dim, q_begin, q_end));
  ASSIGN_OR_RETURN(layer.k_proj,
                   matmul_rows("self_attn.k_proj.weight", kv_dim, kv_begin, kv_end));
  ASSIGN_OR_RETURN(layer.v_proj,
                   matmul_rows("self_attn.v_proj.weight", kv_dim, kv_begin, kv_end));
  ASSIGN_OR_RETURN(layer.o_proj, columns("self_attn.o_proj.weight", q_dim, q_begin, q_end));
  if (config.attention_bias) {
    ASSIGN_OR_RETURN(layer.q_bias,
                     rows("self_attn.q_proj.bias", {q_dim}, DType::kF32, q_begin, q_end));
    ASSIGN_OR_RETURN(layer.k_bias,
                     rows("self_attn.k_proj.bias", {kv_dim}, DType::kF32, kv_begin, kv_end));
    ASSIGN_OR_RETURN(layer.v_bias,
                     rows("self_attn.v_proj.bias", {kv_dim}, DType::kF32, kv_begin, kv_end));
  }
  ASSIGN_OR_RETURN(layer.post_attention_norm, f32("post_attention_layernorm.weight", {hidden}));
  ASSIGN_OR_RETURN(layer.gate_proj,
                   matmul_rows("mlp.gate_proj.weight", inter, mlp_begin, mlp_end));
  ASSIGN_OR_RETURN(layer.up_proj, matmul_rows("mlp.up_proj.weight", inter, mlp_begin, mlp_end));
  ASSIGN_OR_RETURN(layer.down_proj, columns("mlp.down_proj.weight", inter, mlp_begin, mlp_end));
  return layer;
}

}  // namespace

int64_t Weight::numel() const { return data == nullptr ? 0 : NumElements(shape); }

int64_t Weight::num_scales() const {
  if (scales == nullptr) return 0;
  if (dtype == DType::kI4 || (dtype == DType::kF8E4M3 && group_size > 0)) {
    return shape[0] * (shape[1] / group_size);
  }
  return shape[0];
}

absl::StatusOr<std::unique_ptr<LlamaWeights>> LoadLlamaWeights(
    const std::filesystem::path& model_dir, const ModelConfig& config, DType matmul_dtype,
    ThreadPool* pool, const ModelShard* shard) {
  if (matmul_dtype != DType::kF32 && matmul_dtype != DType::kBF16 && matmul_dtype != DType::kF16 &&
      matmul_dtype != DType::kI8 && matmul_dtype != DType::kI4 && matmul_dtype != DType::kF8E4M3) {
    return absl::InvalidArgumentError(absl::StrCat("matmul dtype must be f32, bf16, f16, i8, i4 or fp8, got ",
                                                   std::string(DTypeName(matmul_dtype))));
  }
  ModelShard whole;
  if (shard == nullptr) {
    ASSIGN_OR_RETURN(whole, MakeModelShard(config, ShardSpec{}));
    shard = &whole;
  }
  std::optional<ThreadPool> local_pool;
  if (pool == nullptr) {
    local_pool.emplace(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    pool = &*local_pool;
  }
  auto weights = std::make_unique<LlamaWeights>();
  ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::Open(model_dir));
  weights->checkpoint = std::make_unique<const Checkpoint>(std::move(checkpoint));
  WeightLoader loader(*weights->checkpoint, *pool, *weights);

  // The embedding lives on the first stage, the final norm and lm_head on the last; a middle stage
  // reads neither table. Each is whole or the rank's vocab rows (model_shard.h).
  const bool first_stage = shard->spec.pp_rank == 0;
  const bool last_stage = shard->spec.pp_rank == shard->spec.pp_size - 1;
  const int64_t hidden = config.hidden_size;
  const int64_t vocab = config.vocab_size;
  const int64_t vocab_begin = shard->vocab_begin;
  const int64_t vocab_end = shard->vocab_end;
  std::optional<TensorInfo> embed;
  if (first_stage || (last_stage && config.tie_word_embeddings)) {
    ASSIGN_OR_RETURN(embed, loader.Get("model.embed_tokens.weight", {vocab, hidden}));
  }
  if (first_stage) {
    // The embedding kernel reads f32 and bf16 tables; f16 is widened.
    const DType table_dtype = embed->dtype == DType::kF16 ? DType::kF32 : embed->dtype;
    weights->embed_tokens =
        shard->vocab_parallel
            ? loader.RowsWithZeroRows(*embed, table_dtype, vocab_begin, vocab_end, 1)
            : loader.FromInfo(*embed, table_dtype);
  }
  if (last_stage) {
    // A pre-quantized checkpoint quantizes only what it stores quantized: a tied lm_head (the
    // embedding table) or one it left out stays in its own dtype.
    const bool keep_stored = config.quantization.has_value() && IsQuantized(matmul_dtype);
    // int4 keeps the vocabulary head at int8: the formats that store int4 leave lm_head
    // unquantized, and llama.cpp's 4-bit files keep output.weight at 6 bits or more.
    const DType head_dtype = matmul_dtype == DType::kI4 ? DType::kI8 : matmul_dtype;
    if (config.tie_word_embeddings) {
      const DType target = keep_stored ? embed->dtype : head_dtype;
      if (first_stage && weights->embed_tokens.dtype == target) {
        // The table's first rows (all but the zero row when vocab-parallel), not counted again.
        weights->lm_head = weights->embed_tokens;
        weights->lm_head.shape = {vocab_end - vocab_begin, hidden};
      } else {
        ASSIGN_OR_RETURN(weights->lm_head,
                         loader.Matmul(WeightLoader::RowSlice(*embed, vocab_begin, vocab_end),
                                       target, 0, hidden));
      }
    } else if (config.quantization.has_value() && config.quantization->Quantizes("lm_head")) {
      ASSIGN_OR_RETURN(weights->lm_head,
                       loader.PreQuantized(*config.quantization, "lm_head", vocab, hidden,
                                           vocab_begin, vocab_end, 0, hidden));
    } else {
      ASSIGN_OR_RETURN(TensorInfo lm_head, loader.Get("lm_head.weight", {vocab, hidden}));
      const DType target = keep_stored ? lm_head.dtype : head_dtype;
      ASSIGN_OR_RETURN(weights->lm_head,
                       loader.Matmul(WeightLoader::RowSlice(lm_head, vocab_begin, vocab_end),
                                     target, 0, hidden));
    }
    ASSIGN_OR_RETURN(weights->final_norm,
                     loader.Load("model.norm.weight", {hidden}, DType::kF32));
  }

  weights->layer_begin = shard->layer_begin;
  weights->layers.reserve(shard->num_layers());
  for (int layer_idx = shard->layer_begin; layer_idx < shard->layer_end; ++layer_idx) {
    ASSIGN_OR_RETURN(LayerWeights layer,
                     LoadLayer(loader, config, *shard, layer_idx, matmul_dtype));
    weights->layers.push_back(std::move(layer));
  }
  return weights;
}

void MoveMappedMatmulWeightsToHugePages(LlamaWeights& weights) {
  if (weights.checkpoint == nullptr) return;
  std::vector<Weight*> matmuls;
  if (weights.lm_head.data != weights.embed_tokens.data) matmuls.push_back(&weights.lm_head);
  for (LayerWeights& layer : weights.layers) {
    for (Weight* w : {&layer.q_proj, &layer.k_proj, &layer.v_proj, &layer.o_proj, &layer.gate_proj,
                      &layer.up_proj, &layer.down_proj}) {
      matmuls.push_back(w);
    }
  }
  for (Weight* w : matmuls) {
    const size_t num_bytes = w->num_bytes();
    if (w->data == nullptr || num_bytes < kHugePageMinBytes) continue;
    const auto* data = static_cast<const std::byte*>(w->data);
    const auto& files = weights.checkpoint->files();
    if (std::none_of(files.begin(), files.end(),
                     [&](const SafetensorsFile& f) { return f.Contains(data, num_bytes); })) {
      continue;  // already a copy
    }
    std::byte* dst = weights.arena.Allocate(num_bytes);
    BATON_CHECK(dst != nullptr);
    std::memcpy(dst, data, num_bytes);
    ReleaseMappedRange(data, num_bytes);
    w->data = dst;
    weights.num_mapped_bytes -= num_bytes;
    weights.num_owned_bytes += num_bytes;
  }
}

}  // namespace baton::runtime
