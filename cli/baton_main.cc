// `baton`: one binary, one subcommand per process kind (see DESIGN.md, "Processes").
#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Baton: a disaggregated LLM serving runtime"};
  app.require_subcommand(1);
  int exit_code = 0;
  baton::cli::RegisterServeCommand(app, &exit_code);
  baton::cli::RegisterSchedulerCommand(app, &exit_code);
  baton::cli::RegisterWorkerCommand(app, &exit_code);
  baton::cli::RegisterGenerateCommand(app, &exit_code);
  baton::cli::RegisterBenchCommand(app, &exit_code);
  baton::cli::RegisterPlanCommand(app, &exit_code);
  baton::cli::RegisterTokenizeCommand(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
