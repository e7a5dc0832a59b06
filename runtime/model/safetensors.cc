#include "runtime/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/common/status_macros.h"
#include "nlohmann/json.hpp"

namespace baton::runtime {
namespace {

// The reference implementation refuses headers above 100 MB; so do we, before allocating anything.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeEntry {
  std::string_view name;
  int bits;                    // per element
  std::optional<DType> dtype;  // nullopt: defined by the format, not computed in by Baton
};

// Every dtype of the safetensors format (v0.6), with its element width.
constexpr DTypeEntry kDTypes[] = {
    {"F32", 32, DType::kF32},     {"F16", 16, DType::kF16},     {"BF16", 16, DType::kBF16},
    {"F64", 64, std::nullopt},    {"I64", 64, std::nullopt},    {"U64", 64, std::nullopt},
    {"C64", 64, std::nullopt},    {"I32", 32, std::nullopt},    {"U32", 32, std::nullopt},
    {"I16", 16, std::nullopt},    {"U16", 16, std::nullopt},    {"I8", 8, DType::kI8},
    {"U8", 8, std::nullopt},      {"BOOL", 8, std::nullopt},    {"F8_E4M3", 8, DType::kF8E4M3},
    {"F8_E5M2", 8, std::nullopt}, {"F8_E8M0", 8, std::nullopt}, {"F6_E2M3", 6, std::nullopt},
    {"F6_E3M2", 6, std::nullopt}, {"F4", 4, std::nullopt},
};

const DTypeEntry* LookupDType(std::string_view name) {
  for (const DTypeEntry& entry : kDTypes) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

// A parsed header entry before it becomes a TensorInfo.
struct RawEntry {
  std::string name;
  const DTypeEntry* dtype;
  std::vector<int64_t> shape;
  uint64_t begin;
  uint64_t end;
};

absl::StatusOr<RawEntry> ParseEntry(const std::string& prefix, const std::string& name,
                                    const nlohmann::json& value) {
  const std::string where = absl::StrCat(prefix, "tensor '", name, "': ");
  if (!value.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, "not a JSON object"));
  }
  RawEntry entry{.name = name, .dtype = nullptr, .shape = {}, .begin = 0, .end = 0};

  auto dtype_it = value.find("dtype");
  if (dtype_it == value.end() || !dtype_it->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(where, "missing or non-string field 'dtype'"));
  }
  const std::string& dtype_name = dtype_it->get_ref<const std::string&>();
  entry.dtype = LookupDType(dtype_name);
  if (entry.dtype == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(where, "unknown dtype '", dtype_name, "'"));
  }

  auto shape_it = value.find("shape");
  if (shape_it == value.end() || !shape_it->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(where, "missing or non-array field 'shape'"));
  }
  uint64_t numel = 1;
  for (const nlohmann::json& dim : *shape_it) {
    if (!dim.is_number_unsigned() || dim.get<uint64_t>() > uint64_t{INT64_MAX}) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "'shape' entries must be non-negative integers, got ", dim.dump()));
    }
    const uint64_t size = dim.get<uint64_t>();
    if (__builtin_mul_overflow(numel, size, &numel)) {
      return absl::InvalidArgumentError(absl::StrCat(where, "'shape' ", shape_it->dump(),
                                                     " has more elements than fit in 64 bits"));
    }
    entry.shape.push_back(static_cast<int64_t>(size));
  }

  auto offsets_it = value.find("data_offsets");
  if (offsets_it == value.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
      !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "'data_offsets' must be [begin, end] with non-negative integers"));
  }
  entry.begin = (*offsets_it)[0].get<uint64_t>();
  entry.end = (*offsets_it)[1].get<uint64_t>();
  if (entry.begin > entry.end) {
    return absl::InvalidArgumentError(absl::StrCat(where, "data_offsets [", entry.begin, ", ",
                                                   entry.end, "] has begin after end"));
  }
  uint64_t num_bits = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(entry.dtype->bits), &num_bits) ||
      num_bits % 8 != 0 || num_bits / 8 != entry.end - entry.begin) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "data_offsets [", entry.begin, ", ", entry.end, "] span ",
                     entry.end - entry.begin, " bytes but shape ", shape_it->dump(), " of ",
                     dtype_name, " needs ", numel, " x ", entry.dtype->bits, " bits"));
  }
  return entry;
}

}  // namespace

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t dim : shape) numel *= dim;
  return numel;
}

std::string ShapeToString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::filesystem::path& path) {
  SafetensorsFile file;
  file.path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string message = absl::StrCat(path.string(), ": cannot open: ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(message);
    if (err == EACCES) return absl::PermissionDeniedError(message);
    return absl::InvalidArgumentError(message);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": not a regular file"));
  }
  const size_t file_bytes = static_cast<size_t>(st.st_size);
  if (file_bytes < 8) {
    ::close(fd);
    return absl::DataLossError(absl::StrCat(path.string(), ": file is truncated: ", file_bytes,
                                            " bytes, shorter than the 8-byte header length"));
  }
  void* mapping = ::mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  const int mmap_errno = errno;
  ::close(fd);  // the mapping keeps its own reference to the file
  if (mapping == MAP_FAILED) {
    return absl::InternalError(
        absl::StrCat(path.string(), ": mmap failed: ", std::strerror(mmap_errno)));
  }
  file.mapped_data_ = static_cast<const std::byte*>(mapping);
  file.mapped_bytes_ = file_bytes;
  RETURN_IF_ERROR(file.ParseHeader());
  return file;
}

absl::Status SafetensorsFile::ParseHeader() {
  const std::string prefix = absl::StrCat(path_.string(), ": ");
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) {
    header_bytes = (header_bytes << 8) | static_cast<uint8_t>(mapped_data_[i]);
  }
  if (header_bytes > mapped_bytes_ - 8) {
    return absl::DataLossError(absl::StrCat(prefix, "file is truncated: header length ",
                                            header_bytes, " exceeds the ", mapped_bytes_ - 8,
                                            " bytes after the 8-byte length"));
  }
  if (header_bytes > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "header length ", header_bytes,
                                                   " exceeds the format's limit of ",
                                                   kMaxHeaderBytes));
  }
  const char* header_begin = reinterpret_cast<const char*>(mapped_data_ + 8);
  const nlohmann::json header = nlohmann::json::parse(header_begin, header_begin + header_bytes,
                                                      /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "header is not valid JSON"));
  }
  if (!header.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "header is not a JSON object"));
  }

  const uint64_t data_bytes = mapped_bytes_ - 8 - header_bytes;
  const std::byte* data_section = mapped_data_ + 8 + header_bytes;
  std::vector<RawEntry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) {
        return absl::InvalidArgumentError(absl::StrCat(prefix, "'__metadata__' is not an object"));
      }
      for (const auto& [meta_key, meta_value] : value.items()) {
        if (!meta_value.is_string()) {
          return absl::InvalidArgumentError(
              absl::StrCat(prefix, "'__metadata__' entry '", meta_key, "' is not a string"));
        }
        metadata_.emplace(meta_key, meta_value.get<std::string>());
      }
      continue;
    }
    ASSIGN_OR_RETURN(RawEntry entry, ParseEntry(prefix, key, value));
    if (entry.end > data_bytes) {
      return absl::DataLossError(
          absl::StrCat(prefix, "file is truncated: tensor '", key, "' data_offsets [", entry.begin,
                       ", ", entry.end, "] end beyond the ", data_bytes, "-byte data section"));
    }
    entries.push_back(std::move(entry));
  }

  std::sort(entries.begin(), entries.end(), [](const RawEntry& a, const RawEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 1; i < entries.size(); ++i) {
    // Empty tensors occupy no bytes and cannot overlap anything.
    if (entries[i].begin == entries[i].end) continue;
    for (size_t j = i; j-- > 0;) {
      if (entries[j].begin == entries[j].end) continue;
      if (entries[j].end > entries[i].begin) {
        return absl::InvalidArgumentError(absl::StrCat(prefix, "tensors '", entries[j].name,
                                                       "' and '", entries[i].name,
                                                       "' overlap in the data section"));
      }
      break;  // no earlier overlap, so ends grow with begins: the nearest predecessor decides
    }
  }

  for (RawEntry& entry : entries) {
    if (!entry.dtype->dtype.has_value()) {
      unsupported_.emplace(entry.name, std::string(entry.dtype->name));
      raw_.emplace(entry.name,
                   RawTensorInfo{.dtype = std::string(entry.dtype->name),
                                 .shape = entry.shape,
                                 .data = data_section + entry.begin,
                                 .num_bytes = static_cast<size_t>(entry.end - entry.begin)});
      continue;
    }
    index_.emplace(entry.name, tensors_.size());
    tensors_.push_back(TensorInfo{.name = std::move(entry.name),
                                  .dtype = *entry.dtype->dtype,
                                  .shape = std::move(entry.shape),
                                  .data = data_section + entry.begin,
                                  .num_bytes = static_cast<size_t>(entry.end - entry.begin)});
  }
  return absl::OkStatus();
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      mapped_data_(std::exchange(other.mapped_data_, nullptr)),
      mapped_bytes_(std::exchange(other.mapped_bytes_, 0)),
      tensors_(std::move(other.tensors_)),
      index_(std::move(other.index_)),
      unsupported_(std::move(other.unsupported_)),
      raw_(std::move(other.raw_)),
      metadata_(std::move(other.metadata_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    Unmap();
    path_ = std::move(other.path_);
    mapped_data_ = std::exchange(other.mapped_data_, nullptr);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
    tensors_ = std::move(other.tensors_);
    index_ = std::move(other.index_);
    unsupported_ = std::move(other.unsupported_);
    raw_ = std::move(other.raw_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() { Unmap(); }

void SafetensorsFile::Unmap() {
  if (mapped_data_ != nullptr) {
    ::munmap(const_cast<std::byte*>(mapped_data_), mapped_bytes_);
    mapped_data_ = nullptr;
    mapped_bytes_ = 0;
  }
}

const TensorInfo* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const RawTensorInfo* SafetensorsFile::FindRaw(std::string_view name) const {
  auto it = raw_.find(name);
  return it == raw_.end() ? nullptr : &it->second;
}

absl::StatusOr<const TensorInfo*> SafetensorsFile::Get(std::string_view name) const {
  if (const TensorInfo* info = Find(name)) return info;
  if (auto it = unsupported_.find(name); it != unsupported_.end()) {
    return absl::UnimplementedError(absl::StrCat(path_.string(), ": tensor '", std::string(name),
                                                 "' has dtype ", it->second,
                                                 "; supported: F32, F16, BF16, I8"));
  }
  return absl::NotFoundError(
      absl::StrCat(path_.string(), ": no tensor named '", std::string(name), "'"));
}

bool SafetensorsFile::Contains(const void* ptr, size_t num_bytes) const {
  const auto begin = reinterpret_cast<uintptr_t>(ptr);
  const auto mapping_begin = reinterpret_cast<uintptr_t>(mapped_data_);
  return mapped_data_ != nullptr && begin >= mapping_begin && num_bytes <= mapped_bytes_ &&
         begin - mapping_begin <= mapped_bytes_ - num_bytes;
}

}  // namespace baton::runtime
