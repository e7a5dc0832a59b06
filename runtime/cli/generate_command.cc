#include "runtime/cli/commands.h"

namespace baton::cli {

void RegisterGenerateCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand("generate", "Offline generation in one process");
  cmd->callback([exit_code] { *exit_code = 1; });
}

}  // namespace baton::cli
