// SseParser: incremental parsing of a text/event-stream body (the WHATWG "server-sent events"
// format that OpenAI-compatible servers stream completions in). Bytes arrive in arbitrary pieces;
// Feed returns the data of every event those bytes completed.
//
// Lines end with LF, CRLF or CR. "data:" lines of one event are joined with LF (one leading space
// after the colon is dropped); an empty line ends the event; an event without data lines is not
// returned; comment lines (":...") and the other fields (event, id, retry) are ignored.
//
// Not thread-safe: one parser per stream.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace baton::bench {

class SseParser {
 public:
  std::vector<std::string> Feed(std::string_view bytes);

 private:
  void EndLine(std::vector<std::string>& events);

  std::string line_;
  std::string data_;
  bool has_data_ = false;
  bool after_cr_ = false;  // the last byte was CR: a following LF belongs to the same line end
};

}  // namespace baton::bench
