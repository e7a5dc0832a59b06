// Checkpoint: every tensor of a Hugging Face model directory, by name, across its safetensors
// files.
//
// Open(model_dir) picks the files the way transformers does:
//   1. model.safetensors, if present (a single-file checkpoint);
//   2. else model.safetensors.index.json, whose "weight_map" maps tensor name -> shard file name
//      (model-00001-of-00003.safetensors, ...); every shard it names must exist and hold the
//      tensors the index assigns to it;
//   3. else every *.safetensors file of the directory (sorted by name).
// A tensor name found in two files is an error (kInvalidArgument naming both files). A directory
// with none of the above is kNotFound.
//
// Every file stays memory-mapped while the Checkpoint lives; TensorInfo::data points into the maps.
// Movable, not copyable; immutable after Open(), so const methods are safe from any thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/model/safetensors.h"

namespace baton::runtime {

class Checkpoint {
 public:
  static absl::StatusOr<Checkpoint> Open(const std::filesystem::path& model_dir);

  Checkpoint(Checkpoint&&) noexcept = default;
  Checkpoint& operator=(Checkpoint&&) noexcept = default;
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  const std::vector<SafetensorsFile>& files() const { return files_; }
  size_t num_tensors() const { return tensors_.size(); }

  // nullptr when no file holds `name` in a supported dtype (F32, F16, BF16).
  const TensorInfo* Find(std::string_view name) const;
  // A tensor in a dtype Baton does not compute in (I32, ...), as raw bytes; nullptr when absent.
  const RawTensorInfo* FindRaw(std::string_view name) const;
  // The file holding `name`; nullptr when absent.
  const SafetensorsFile* FileOf(std::string_view name) const;

  // The tensor `name`, which must have exactly `expected_shape`. Errors: kNotFound naming the
  // tensor and the directory; kUnimplemented when it is stored in an unsupported dtype;
  // kInvalidArgument on a shape mismatch, stating the tensor, both shapes and the file.
  absl::StatusOr<TensorInfo> Get(std::string_view name,
                                 std::span<const int64_t> expected_shape) const;

 private:
  struct Location {
    size_t file_idx;
    const TensorInfo* info;  // into files_[file_idx]; stable across moves of files_
  };

  Checkpoint() = default;
  absl::Status AddFile(SafetensorsFile file);

  std::filesystem::path dir_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, Location, std::less<>> tensors_;
  std::map<std::string, size_t, std::less<>> unsupported_;  // name -> file_idx
};

}  // namespace baton::runtime
