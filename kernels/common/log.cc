#include "kernels/common/log.h"

#include <unistd.h>

#include <atomic>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace baton {
namespace {

std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};
std::mutex g_name_mu;
std::string* g_process_name = new std::string("baton");  // never freed: logging may outlive main

}  // namespace

std::optional<LogLevel> ParseLogLevel(absl::string_view name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warning") return LogLevel::kWarning;
  if (name == "error") return LogLevel::kError;
  return std::nullopt;
}

const char* LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "?";
}

void InitLogging(absl::string_view process_name, LogLevel min_level) {
  {
    std::lock_guard<std::mutex> lock(g_name_mu);
    *g_process_name = std::string(process_name);
  }
  g_min_level.store(static_cast<int>(min_level));
}

LogLevel MinLogLevel() { return static_cast<LogLevel>(g_min_level.load(std::memory_order_relaxed)); }

void Log(LogLevel level, absl::string_view message) {
  if (!LogEnabled(level)) return;
  std::string line;
  {
    std::lock_guard<std::mutex> lock(g_name_mu);
    line = absl::StrCat(*g_process_name, ": ", message, "\n");
  }
  // One write per line: lines of concurrent threads never interleave.
  size_t written = 0;
  while (written < line.size()) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + written, line.size() - written);
    if (n <= 0) return;
    written += static_cast<size_t>(n);
  }
}

std::string LogValue(absl::string_view value) {
  bool plain = !value.empty();
  for (const char c : value) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      plain = false;
      break;
    }
  }
  if (plain) return std::string(value);
  std::string out = "\"";
  for (const char c : value) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          absl::StrAppendFormat(&out, "\\x%02x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  out += "\"";
  return out;
}

}  // namespace baton
