// Python str semantics over UTF-8: indexing and slicing count code points, whitespace is Python's
// str.isspace() set, and strip/split/title/capitalize behave as CPython's. Case mapping is ASCII
// through ICU's
// root locale, as CPython's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace baton::runtime::jinja {

// The code points of `s` (invalid bytes decode to U+FFFD).
std::u32string DecodeUtf8(std::string_view s);
std::string EncodeUtf8(std::u32string_view s);

bool IsPyWhitespace(char32_t c);

// str.strip / lstrip / rstrip; `chars` nullopt strips whitespace.
std::string PyStrip(std::string_view s, const std::optional<std::string>& chars, bool left,
                    bool right);
// str.split(sep, maxsplit) (maxsplit < 0: no limit); sep nullopt splits on whitespace runs.
std::vector<std::string> PySplit(std::string_view s, const std::optional<std::string>& sep,
                                 int64_t maxsplit);
std::vector<std::string> PyRSplit(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit);
// str.replace(old, new, count) (count < 0: all).
std::string PyReplace(std::string_view s, std::string_view old, std::string_view replacement,
                      int64_t count);
std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
std::string PyTitle(std::string_view s);       // str.title()
std::string PyCapitalize(std::string_view s);  // str.capitalize()
size_t PyLength(std::string_view s);           // code points
// Whether `c` matches Python's re `\w` (letters, digits, underscore).
bool IsWordChar(char32_t c);

}  // namespace baton::runtime::jinja
