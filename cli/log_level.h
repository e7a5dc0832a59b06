// `--log-level debug|info|warning|error` of the long-running subcommands (serve, scheduler,
// worker): the threshold of kernels/common/log.h. `baton serve` hands its own to every process it
// starts.
#pragma once

#include <string>

#include "CLI/CLI.hpp"

namespace baton::cli {

// Adds --log-level to `cmd`, stored in *level (default "info"); any other value is a usage error.
void AddLogLevelFlag(CLI::App& cmd, std::string* level);
// Sets the process's log prefix ("baton scheduler") and threshold from a value AddLogLevelFlag
// accepted.
void StartLogging(const char* process_name, const std::string& level);

}  // namespace baton::cli
