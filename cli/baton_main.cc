// `baton`: one binary, one subcommand per process kind (see DESIGN.md, "Processes").
#include <cstdio>
#include <string>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Baton: a disaggregated LLM serving runtime"};
  app.set_version_flag("--version", "baton " BATON_VERSION);
  app.require_subcommand(1);
  int exit_code = 0;
  baton::cli::RegisterServeCommand(app, &exit_code);
  baton::cli::RegisterSchedulerCommand(app, &exit_code);
  baton::cli::RegisterWorkerCommand(app, &exit_code);
  baton::cli::RegisterGenerateCommand(app, &exit_code);
  baton::cli::RegisterEvalCommand(app, &exit_code);
  baton::cli::RegisterBenchCommand(app, &exit_code);
  baton::cli::RegisterPlanCommand(app, &exit_code);
  baton::cli::RegisterTokenizeCommand(app, &exit_code);
  // CLI11 would answer an unknown command with "A subcommand is required": name it and the known ones.
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const CLI::App* command : app.get_subcommands({})) {
      found = found || command->check_name(argv[1]);
      known += known.empty() ? command->get_name() : ", " + command->get_name();
    }
    if (!found) {
      std::fprintf(stderr, "baton: unknown command '%s' (%s)\n", argv[1], known.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every other parse error is bad input, exit 2 as the README says
    // (CLI11's own codes, 105-120, would tell a script nothing).
    return app.exit(e) == 0 ? 0 : 2;
  }
  return exit_code;
}
