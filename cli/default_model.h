// The embedded default model: models/kjv-4m, a small Llama trained on the King James Bible by
// scripts/train_default_model.py and shipped with the repository (models/kjv-4m/README.md).
#pragma once

#include <filesystem>
#include <string>

#include "absl/status/statusor.h"

namespace baton::cli {

// Returns model_dir when given; otherwise the default model's directory (FailedPrecondition when a
// checkout lacks it).
absl::StatusOr<std::filesystem::path> ResolveModelDir(const std::string& model_dir);

}  // namespace baton::cli
