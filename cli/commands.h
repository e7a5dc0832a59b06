// The `baton` binary's subcommands. Each Register* adds one subcommand to the app; its callback runs
// the command and stores the process exit code in *exit_code (0 ok, 1 runtime failure, 2 bad usage).
#pragma once

#include "CLI/CLI.hpp"

namespace baton::cli {

void RegisterGenerateCommand(CLI::App& app, int* exit_code);
void RegisterEvalCommand(CLI::App& app, int* exit_code);
void RegisterTokenizeCommand(CLI::App& app, int* exit_code);
void RegisterServeCommand(CLI::App& app, int* exit_code);
void RegisterSchedulerCommand(CLI::App& app, int* exit_code);
void RegisterWorkerCommand(CLI::App& app, int* exit_code);
void RegisterBenchCommand(CLI::App& app, int* exit_code);
void RegisterPlanCommand(CLI::App& app, int* exit_code);
// `baton plan profile`, a subcommand of `plan` (cli/plan_profile_command.cc).
void RegisterPlanProfileCommand(CLI::App& plan, int* exit_code);
// `baton plan calibrate`, a subcommand of `plan` (cli/plan_calibrate_command.cc).
void RegisterPlanCalibrateCommand(CLI::App& plan, int* exit_code);

}  // namespace baton::cli
