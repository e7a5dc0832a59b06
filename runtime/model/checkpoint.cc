#include "runtime/model/checkpoint.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "nlohmann/json.hpp"

namespace baton::runtime {
namespace {

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

bool IsRegularFile(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path.string(), ": cannot open"));
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path.string(), ": read failed"));
  return contents.str();
}

// Shard file names from the index, each with the tensors the index puts in it.
absl::StatusOr<std::map<std::string, std::vector<std::string>>> ReadIndex(
    const std::filesystem::path& index_path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(index_path));
  const nlohmann::json index = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const std::string prefix = absl::StrCat(index_path.string(), ": ");
  if (index.is_discarded() || !index.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "not a valid JSON object"));
  }
  auto weight_map = index.find("weight_map");
  if (weight_map == index.end() || !weight_map->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "missing or non-object field 'weight_map'"));
  }
  std::map<std::string, std::vector<std::string>> shards;
  for (const auto& [name, shard] : weight_map->items()) {
    if (!shard.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "weight_map entry '", name, "' is not a file name string"));
    }
    const std::string& shard_name = shard.get_ref<const std::string&>();
    // Shards live next to the index: refuse paths that would leave the directory.
    if (shard_name.empty() || shard_name.find('/') != std::string::npos || shard_name == "..") {
      return absl::InvalidArgumentError(absl::StrCat(prefix, "weight_map entry '", name,
                                                     "' names shard '", shard_name,
                                                     "', which is not a plain file name"));
    }
    shards[shard_name].push_back(name);
  }
  if (shards.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "'weight_map' is empty"));
  }
  return shards;
}

}  // namespace

absl::StatusOr<Checkpoint> Checkpoint::Open(const std::filesystem::path& model_dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(model_dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat(model_dir.string(), ": model directory does not exist"));
  }
  Checkpoint checkpoint;
  checkpoint.dir_ = model_dir;

  if (IsRegularFile(model_dir / kSingleFile)) {
    ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(model_dir / kSingleFile));
    RETURN_IF_ERROR(checkpoint.AddFile(std::move(file)));
    return checkpoint;
  }

  if (const std::filesystem::path index_path = model_dir / kIndexFile; IsRegularFile(index_path)) {
    ASSIGN_OR_RETURN(auto shards, ReadIndex(index_path));
    for (const auto& [shard_name, names] : shards) {
      const std::filesystem::path shard_path = model_dir / shard_name;
      if (!IsRegularFile(shard_path)) {
        return absl::NotFoundError(absl::StrCat(index_path.string(), ": shard '", shard_name,
                                                "' (holding '", names.front(),
                                                "') does not exist in ", model_dir.string()));
      }
      ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(shard_path));
      for (const std::string& name : names) {
        if (file.Find(name) == nullptr && !file.unsupported_tensors().contains(name)) {
          return absl::InvalidArgumentError(absl::StrCat(index_path.string(), ": tensor '", name,
                                                         "' is mapped to shard '", shard_name,
                                                         "', which does not contain it"));
        }
      }
      RETURN_IF_ERROR(checkpoint.AddFile(std::move(file)));
    }
    return checkpoint;
  }

  std::vector<std::filesystem::path> paths;
  for (const auto& entry : std::filesystem::directory_iterator(model_dir, ec)) {
    if (entry.is_regular_file(ec) && entry.path().extension() == ".safetensors") {
      paths.push_back(entry.path());
    }
  }
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat(model_dir.string(), ": cannot list directory: ", ec.message()));
  }
  if (paths.empty()) {
    return absl::NotFoundError(absl::StrCat(model_dir.string(), ": no ", kSingleFile, ", no ",
                                            kIndexFile, " and no *.safetensors file"));
  }
  std::sort(paths.begin(), paths.end());
  for (const std::filesystem::path& path : paths) {
    ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(path));
    RETURN_IF_ERROR(checkpoint.AddFile(std::move(file)));
  }
  return checkpoint;
}

absl::Status Checkpoint::AddFile(SafetensorsFile file) {
  const size_t file_idx = files_.size();
  auto duplicate = [&](const std::string& name, size_t other_idx) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir_.string(), ": tensor '", name, "' is stored twice, in ",
        files_[other_idx].path().filename().string(), " and ", file.path().filename().string()));
  };
  for (const TensorInfo& info : file.tensors()) {
    if (auto it = tensors_.find(info.name); it != tensors_.end()) {
      return duplicate(info.name, it->second.file_idx);
    }
    if (auto it = unsupported_.find(info.name); it != unsupported_.end()) {
      return duplicate(info.name, it->second);
    }
    // TensorInfo lives in the file's vector, whose heap buffer moves with the file.
    tensors_.emplace(info.name, Location{file_idx, &info});
  }
  for (const auto& [name, dtype] : file.unsupported_tensors()) {
    if (auto it = tensors_.find(name); it != tensors_.end()) {
      return duplicate(name, it->second.file_idx);
    }
    if (auto it = unsupported_.find(name); it != unsupported_.end()) {
      return duplicate(name, it->second);
    }
    unsupported_.emplace(name, file_idx);
  }
  files_.push_back(std::move(file));
  return absl::OkStatus();
}

const TensorInfo* Checkpoint::Find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second.info;
}

const RawTensorInfo* Checkpoint::FindRaw(std::string_view name) const {
  auto it = unsupported_.find(name);
  return it == unsupported_.end() ? nullptr : files_[it->second].FindRaw(name);
}

const SafetensorsFile* Checkpoint::FileOf(std::string_view name) const {
  if (auto it = tensors_.find(name); it != tensors_.end()) return &files_[it->second.file_idx];
  if (auto it = unsupported_.find(name); it != unsupported_.end()) return &files_[it->second];
  return nullptr;
}

absl::StatusOr<TensorInfo> Checkpoint::Get(std::string_view name,
                                           std::span<const int64_t> expected_shape) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    if (auto unsupported = unsupported_.find(name); unsupported != unsupported_.end()) {
      return files_[unsupported->second].Get(name).status();  // kUnimplemented naming the dtype
    }
    return absl::NotFoundError(
        absl::StrCat("tensor '", std::string(name), "' not found in checkpoint ", dir_.string()));
  }
  const TensorInfo& info = *it->second.info;
  if (!std::equal(info.shape.begin(), info.shape.end(), expected_shape.begin(),
                  expected_shape.end())) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", std::string(name), "' has shape ", ShapeToString(info.shape),
                     ", expected ", ShapeToString({expected_shape.begin(), expected_shape.end()}),
                     " (in ", files_[it->second.file_idx].path().string(), ")"));
  }
  return info;
}

}  // namespace baton::runtime
