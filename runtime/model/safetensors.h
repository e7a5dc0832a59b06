// SafetensorsFile: one memory-mapped *.safetensors file and the tensors its header describes.
//
// Format (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length N, then N
// bytes of JSON, `{"<name>": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ...,
// "__metadata__": {"<key>": "<string>"}}`, then the data section; offsets are relative to its
// start.
//
// Open() validates the whole header before it returns: the header length fits the file, the JSON is
// an object of well-formed entries, every dtype is one the format defines, offsets lie inside the
// data section, end - begin == numel * element size, and no two tensors overlap. A tensor stored in
// a dtype the format defines but Baton does not compute in (F64, I64, U8, F8_E4M3, ...) does NOT
// fail Open(): real checkpoints carry such side tensors (position-id buffers, quantization scales)
// that a loader never asks for. It is listed by unsupported_tensors(), absent from
// tensors()/Find(), and Get() on its name returns kUnimplemented naming the tensor, its dtype and
// the file.
//
// Status codes: kNotFound (no such file), kPermissionDenied, kDataLoss (the file is shorter than
// its header says: a truncated download), kInvalidArgument (anything else malformed). Every message
// starts with the file's path and names the tensor or field at fault.
//
// The mapping is read-only (PROT_READ, MAP_PRIVATE) and lives as long as the object; every
// TensorInfo::data points into it. Movable (pointers into the mapping stay valid), not copyable.
// Immutable after Open(): const methods may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/common/dtype.h"

namespace baton::runtime {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;       // row-major; empty for a scalar
  const std::byte* data = nullptr;  // [numel] elements of dtype, little-endian, inside the mapping;
                                    // aligned only as the file happens to place it
  size_t num_bytes = 0;             // numel * DTypeBytes(dtype)
};

// Number of elements of a shape (1 for a scalar).
int64_t NumElements(const std::vector<int64_t>& shape);
// "[2, 3]" for error messages.
std::string ShapeToString(const std::vector<int64_t>& shape);

// A tensor in a dtype Baton does not compute in (I32 words of packed int8 weights, ...): its bytes
// and the format's dtype name, for a loader that knows how to read them.
struct RawTensorInfo {
  std::string dtype;  // the format's name: "I32", "I64", "U8", ...
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;  // inside the mapping, aligned only as the file places it
  size_t num_bytes = 0;
};

class SafetensorsFile {
 public:
  // Maps and validates `path`. Errors as described in the file comment.
  static absl::StatusOr<SafetensorsFile> Open(const std::filesystem::path& path);

  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();  // unmaps

  const std::filesystem::path& path() const { return path_; }

  // Tensors in a supported dtype, in data-offset order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // name -> safetensors dtype string ("I64", ...) of the tensors in dtypes Baton does not support.
  const std::map<std::string, std::string, std::less<>>& unsupported_tensors() const {
    return unsupported_;
  }
  // The "__metadata__" object (empty when absent).
  const std::map<std::string, std::string, std::less<>>& metadata() const { return metadata_; }

  // nullptr when the file holds no tensor `name` in a supported dtype.
  const TensorInfo* Find(std::string_view name) const;
  // nullptr when the file holds no tensor `name` in an unsupported dtype.
  const RawTensorInfo* FindRaw(std::string_view name) const;
  // kNotFound naming the tensor and the file, or kUnimplemented for an unsupported dtype.
  absl::StatusOr<const TensorInfo*> Get(std::string_view name) const;

  // The whole mapping: [mapped_bytes] bytes starting at mapped_data().
  const std::byte* mapped_data() const { return mapped_data_; }
  size_t mapped_bytes() const { return mapped_bytes_; }
  // True when [ptr, ptr + num_bytes) lies inside the mapping (zero-copy checks).
  bool Contains(const void* ptr, size_t num_bytes) const;

 private:
  SafetensorsFile() = default;
  absl::Status ParseHeader();
  void Unmap();

  std::filesystem::path path_;
  const std::byte* mapped_data_ = nullptr;
  size_t mapped_bytes_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> position in tensors_
  std::map<std::string, std::string, std::less<>> unsupported_;
  std::map<std::string, RawTensorInfo, std::less<>> raw_;  // the unsupported tensors' bytes
  std::map<std::string, std::string, std::less<>> metadata_;
};

}  // namespace baton::runtime
