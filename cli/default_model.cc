#include "cli/default_model.h"

#include "absl/strings/str_cat.h"

namespace baton::cli {

absl::StatusOr<std::filesystem::path> ResolveModelDir(const std::string& model_dir) {
  if (!model_dir.empty()) return std::filesystem::path(model_dir);
  const std::filesystem::path dir = BATON_DEFAULT_MODEL_DIR;
  if (!std::filesystem::exists(dir / "config.json")) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no --model given and the default model is missing from ", dir.string(),
        " (the repository ships it; a checkout without it needs --model)"));
  }
  return dir;
}

}  // namespace baton::cli
