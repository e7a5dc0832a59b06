// UTF-8 scanning with the "maximal subpart" replacement rule that Rust's String::from_utf8_lossy
// and Python's bytes.decode(errors="replace") use: each maximal invalid subsequence becomes one
// U+FFFD. Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace baton::runtime::utf8 {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

enum class SequenceKind : uint8_t {
  kValid,      // a complete, valid character
  kInvalid,    // a maximal invalid subpart: replace by one U+FFFD
  kTruncated,  // a valid prefix of a character that the input ends in the middle of
};

struct Sequence {
  SequenceKind kind;
  size_t num_bytes;  // >= 1 whenever pos < bytes.size()
};

// Classifies the bytes starting at bytes[pos]. Pre-condition: pos < bytes.size().
Sequence ScanSequence(std::string_view bytes, size_t pos);

bool IsValid(std::string_view bytes);

// Appends `bytes` to *out with each maximal invalid subpart (and a truncated tail) replaced by
// U+FFFD. Returns true if `bytes` ended with a truncated (valid so far) character.
bool AppendLossy(std::string_view bytes, std::string* out);

// Whether `bytes` end in the middle of a character whose next bytes could still make it valid.
bool EndsWithTruncatedSequence(std::string_view bytes);

void AppendCodepoint(char32_t codepoint, std::string* out);

// Decodes the character at text[*pos] and advances *pos past it. Pre-condition: `text` is valid
// UTF-8 and *pos < text.size() is at a character boundary.
char32_t DecodeAt(std::string_view text, size_t* pos);

// Byte length of the character whose lead byte is `lead` (valid UTF-8 assumed).
inline size_t CharLength(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

}  // namespace baton::runtime::utf8
