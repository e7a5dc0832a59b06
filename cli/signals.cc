#include "cli/signals.h"

#include <csignal>
#include <cstdio>
#include <string>

namespace baton::cli {
namespace {

std::atomic<bool> stop_requested = false;

extern "C" void OnStopSignal(int) { stop_requested.store(true); }

}  // namespace

void InstallStopSignalHandlers() {
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

const std::atomic<bool>* StopFlag() { return &stop_requested; }

int ReportStatus(std::string_view command, const absl::Status& status) {
  if (status.ok()) return 0;
  std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(command.size()), command.data(),
               std::string(status.message()).c_str());
  return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

}  // namespace baton::cli
