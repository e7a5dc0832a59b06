#include "cli/default_model.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace baton::cli {

absl::StatusOr<std::filesystem::path> ResolveModelDir(const std::string& model_dir) {
  if (!model_dir.empty()) return std::filesystem::path(model_dir);
  const std::filesystem::path dir = BATON_DEFAULT_MODEL_DIR;
  if (std::filesystem::exists(dir / "config.json")) return dir;
  const std::filesystem::path source = BATON_SOURCE_DIR;
  const std::filesystem::path python = source / ".venv" / "bin" / "python";
  const std::string command =
      absl::StrCat("'", python.string(), "' '", (source / "scripts" / "make_checkpoint.py").string(),
                   "' --shape tiny --out '", dir.string(), "' >&2");
  std::fprintf(stderr, "baton: generating the default model into %s\n", dir.c_str());
  if (std::system(command.c_str()) != 0 || !std::filesystem::exists(dir / "config.json")) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no --model given and the default model could not be generated into ", dir.string(),
        " (run scripts/setup.sh first)"));
  }
  return dir;
}

}  // namespace baton::cli
