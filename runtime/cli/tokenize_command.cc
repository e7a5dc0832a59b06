#include "runtime/cli/commands.h"

namespace baton::cli {

void RegisterTokenizeCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand("tokenize", "Encode text with a tokenizer.json");
  cmd->callback([exit_code] { *exit_code = 1; });
}

}  // namespace baton::cli
