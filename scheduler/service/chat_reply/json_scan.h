// Reading JSON out of text that is still arriving: where a value ends (or that it has not ended
// yet), and the name and arguments of a tool call object ({"name": ..., "arguments": {...}}) as far
// as the text goes. The tool-call formats (tool_call_formats.h) are built on these; they rescan a
// reply from its start each time it grows, so everything here is a pure function of the text.
//
// The scan is structural (strings with their escapes, brackets that must match, the punctuation of
// an object's members); scalars are taken as runs of literal characters and checked only when a
// caller parses them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace baton::scheduler {

enum class ScanState { kComplete, kIncomplete, kInvalid };

struct ValueScan {
  ScanState state = ScanState::kIncomplete;
  size_t end = 0;  // one past the value when complete; where it went wrong when invalid
};

// The position of the first character at or after `pos` that is not JSON whitespace.
size_t SkipJsonSpace(std::string_view text, size_t pos);

// The JSON value that starts exactly at text[begin]. A number or literal that reaches the end of
// the text is incomplete (more digits may follow).
ValueScan ScanJsonValue(std::string_view text, size_t begin);

// A tool call written as a JSON object: its name (the "name" member, a string) and its arguments
// (the first member named in `argument_keys`), as far as the text goes.
struct CallObjectScan {
  ScanState state = ScanState::kIncomplete;  // of the whole object
  size_t end = 0;                            // one past its '}' when complete
  std::optional<std::string> name;           // once the name's string is complete
  // The arguments' JSON text so far: from its first character to its end, or to the end of the
  // text while it is incomplete.
  std::optional<std::string_view> arguments;
  bool arguments_complete = false;
};

// Pre: text[begin] == '{'.
CallObjectScan ScanCallObject(std::string_view text, size_t begin,
                              const std::vector<std::string_view>& argument_keys);

// The length of the longest suffix of `text` that is a proper prefix of `marker`: text that may
// still turn out to start the marker, and so is held back.
size_t HeldMarkerPrefix(std::string_view text, std::string_view marker);

}  // namespace baton::scheduler
