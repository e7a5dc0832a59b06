#include "cli/log_level.h"

#include "kernels/common/log.h"

namespace baton::cli {

void AddLogLevelFlag(CLI::App& cmd, std::string* level) {
  *level = "info";
  cmd.add_option("--log-level", *level, "Least severe log lines written to stderr: debug, info, warning or error")
      ->capture_default_str()
      ->check(CLI::IsMember({"debug", "info", "warning", "error"}));
}

void StartLogging(const char* process_name, const std::string& level) {
  InitLogging(process_name, ParseLogLevel(level).value_or(LogLevel::kInfo));
}

}  // namespace baton::cli
