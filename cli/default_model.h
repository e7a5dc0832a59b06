// The embedded default model: the generated `tiny` checkpoint, made on first use.
#pragma once

#include <filesystem>
#include <string>

#include "absl/status/statusor.h"

namespace baton::cli {

// Returns model_dir when given; otherwise the default model's directory, generating the checkpoint
// there (scripts/make_checkpoint.py in the project's Python environment) when it is not yet present.
absl::StatusOr<std::filesystem::path> ResolveModelDir(const std::string& model_dir);

}  // namespace baton::cli
