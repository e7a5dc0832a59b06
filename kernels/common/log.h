// The project's one logging facility: a line per event on stderr, "<process>: <message>" (as every
// Baton process has always written them), kept when its level is at or above the process's
// threshold (`--log-level` of `baton serve`, `baton scheduler`, `baton worker`). The pinned abseil
// predates absl/log, hence this.
//
// Levels: debug (what a developer traces), info (the default: start-up, workers registering, one
// line per request on the scheduler), warning (a worker died, a request failed), error (the
// process cannot go on). Thread-safe: one write(2) per line, so lines from threads never interleave.
#pragma once

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace baton {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// "debug", "info", "warning", "error"; nullopt for anything else.
std::optional<LogLevel> ParseLogLevel(absl::string_view name);
const char* LogLevelName(LogLevel level);

// The process's threshold (default info) and the prefix of its lines (default "baton"). Call once,
// early in main's subcommand; later calls replace both.
void InitLogging(absl::string_view process_name, LogLevel min_level);
LogLevel MinLogLevel();
inline bool LogEnabled(LogLevel level) { return level >= MinLogLevel(); }

// Writes "<process>: <message>\n" to stderr when `level` is enabled.
void Log(LogLevel level, absl::string_view message);
inline void LogDebug(absl::string_view message) { Log(LogLevel::kDebug, message); }
inline void LogInfo(absl::string_view message) { Log(LogLevel::kInfo, message); }
inline void LogWarning(absl::string_view message) { Log(LogLevel::kWarning, message); }
inline void LogError(absl::string_view message) { Log(LogLevel::kError, message); }

// A value for a key=value log field: as is when it has no space, quote, '=' or control character
// (and is not empty), else in double quotes with '"' and '\' escaped and control characters as \n,
// \t or \xHH.
std::string LogValue(absl::string_view value);

}  // namespace baton
