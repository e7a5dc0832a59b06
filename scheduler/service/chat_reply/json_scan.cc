#include "scheduler/service/chat_reply/json_scan.h"

#include <algorithm>

#include "nlohmann/json.hpp"

namespace baton::scheduler {
namespace {

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// A number, true, false or null is a run of these.
bool IsLiteralChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
         c == '+' || c == '.';
}

ValueScan ScanString(std::string_view text, size_t begin) {
  for (size_t i = begin + 1; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\') {
      ++i;  // the escaped character, whatever it is (the parse that reads the string checks it)
    } else if (c == '"') {
      return {ScanState::kComplete, i + 1};
    } else if (static_cast<unsigned char>(c) < 0x20) {
      return {ScanState::kInvalid, i};
    }
  }
  return {ScanState::kIncomplete, text.size()};
}

ValueScan ScanNested(std::string_view text, size_t begin) {
  std::string closers;
  for (size_t i = begin; i < text.size();) {
    const char c = text[i];
    if (c == '"') {
      const ValueScan s = ScanString(text, i);
      if (s.state != ScanState::kComplete) return s;
      i = s.end;
      continue;
    }
    if (c == '{') closers.push_back('}');
    if (c == '[') closers.push_back(']');
    if (c == '}' || c == ']') {
      if (closers.empty() || closers.back() != c) return {ScanState::kInvalid, i};
      closers.pop_back();
      if (closers.empty()) return {ScanState::kComplete, i + 1};
    }
    ++i;
  }
  return {ScanState::kIncomplete, text.size()};
}

// The string value of the JSON string text[begin, end), or nullopt if it does not parse.
std::optional<std::string> ParseString(std::string_view text, size_t begin, size_t end) {
  const nlohmann::json value = nlohmann::json::parse(text.substr(begin, end - begin), nullptr, false);
  if (!value.is_string()) return std::nullopt;
  return value.get<std::string>();
}

}  // namespace

size_t SkipJsonSpace(std::string_view text, size_t pos) {
  while (pos < text.size() && IsJsonSpace(text[pos])) ++pos;
  return pos;
}

ValueScan ScanJsonValue(std::string_view text, size_t begin) {
  if (begin >= text.size()) return {ScanState::kIncomplete, text.size()};
  const char c = text[begin];
  if (c == '"') return ScanString(text, begin);
  if (c == '{' || c == '[') return ScanNested(text, begin);
  if (c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n') {
    size_t i = begin;
    while (i < text.size() && IsLiteralChar(text[i])) ++i;
    if (i == text.size()) return {ScanState::kIncomplete, i};
    return {ScanState::kComplete, i};
  }
  return {ScanState::kInvalid, begin};
}

CallObjectScan ScanCallObject(std::string_view text, size_t begin,
                              const std::vector<std::string_view>& argument_keys) {
  CallObjectScan out;
  auto stop = [&out](ScanState state, size_t at) {
    out.state = state;
    out.end = at;
    return out;
  };
  size_t i = SkipJsonSpace(text, begin + 1);
  if (i < text.size() && text[i] == '}') return stop(ScanState::kComplete, i + 1);
  for (;;) {
    if (i >= text.size()) return stop(ScanState::kIncomplete, i);
    if (text[i] != '"') return stop(ScanState::kInvalid, i);
    const ValueScan key_scan = ScanString(text, i);
    if (key_scan.state != ScanState::kComplete) return stop(key_scan.state, key_scan.end);
    const std::optional<std::string> key = ParseString(text, i, key_scan.end);
    if (!key) return stop(ScanState::kInvalid, i);
    i = SkipJsonSpace(text, key_scan.end);
    if (i >= text.size()) return stop(ScanState::kIncomplete, i);
    if (text[i] != ':') return stop(ScanState::kInvalid, i);
    i = SkipJsonSpace(text, i + 1);
    if (i >= text.size()) return stop(ScanState::kIncomplete, i);
    const ValueScan value = ScanJsonValue(text, i);
    if (*key == "name" && !out.name) {
      if (text[i] != '"') return stop(ScanState::kInvalid, i);
      if (value.state == ScanState::kComplete) {
        out.name = ParseString(text, i, value.end);
        if (!out.name) return stop(ScanState::kInvalid, i);
      }
    }
    const bool is_arguments =
        std::find(argument_keys.begin(), argument_keys.end(), *key) != argument_keys.end();
    if (is_arguments && !out.arguments && value.state != ScanState::kInvalid) {
      const size_t value_end = value.state == ScanState::kComplete ? value.end : text.size();
      out.arguments = text.substr(i, value_end - i);
      out.arguments_complete = value.state == ScanState::kComplete;
    }
    if (value.state != ScanState::kComplete) return stop(value.state, value.end);
    i = SkipJsonSpace(text, value.end);
    if (i >= text.size()) return stop(ScanState::kIncomplete, i);
    if (text[i] == '}') return stop(ScanState::kComplete, i + 1);
    if (text[i] != ',') return stop(ScanState::kInvalid, i);
    i = SkipJsonSpace(text, i + 1);
  }
}

size_t HeldMarkerPrefix(std::string_view text, std::string_view marker) {
  if (marker.empty()) return 0;
  for (size_t len = std::min(text.size(), marker.size() - 1); len > 0; --len) {
    if (text.substr(text.size() - len) == marker.substr(0, len)) return len;
  }
  return 0;
}

}  // namespace baton::scheduler
