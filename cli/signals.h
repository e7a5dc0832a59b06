// Process plumbing shared by the long-running subcommands (scheduler, worker).
#pragma once

#include <atomic>
#include <string_view>

#include "absl/status/status.h"

namespace baton::cli {

// SIGINT and SIGTERM set the stop flag (and nothing else: the process winds down on its own).
void InstallStopSignalHandlers();
const std::atomic<bool>* StopFlag();

// Prints "<command>: <message>" for an error and returns the exit code: 0 ok, 2 bad input, 1 other.
int ReportStatus(std::string_view command, const absl::Status& status);

}  // namespace baton::cli
