#include "runtime/tokenizer/utf8.h"

namespace baton::runtime::utf8 {

Sequence ScanSequence(std::string_view bytes, size_t pos) {
  const auto byte_at = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
  const uint8_t lead = byte_at(pos);
  if (lead < 0x80) return {SequenceKind::kValid, 1};
  size_t num_continuation = 0;
  uint8_t second_lo = 0x80;
  uint8_t second_hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    num_continuation = 1;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    num_continuation = 2;
    if (lead == 0xE0) second_lo = 0xA0;  // no overlong forms
    if (lead == 0xED) second_hi = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    num_continuation = 3;
    if (lead == 0xF0) second_lo = 0x90;  // no overlong forms
    if (lead == 0xF4) second_hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {SequenceKind::kInvalid, 1};
  }
  for (size_t i = 1; i <= num_continuation; ++i) {
    if (pos + i >= bytes.size()) return {SequenceKind::kTruncated, i};
    const uint8_t lo = i == 1 ? second_lo : 0x80;
    const uint8_t hi = i == 1 ? second_hi : 0xBF;
    const uint8_t byte = byte_at(pos + i);
    if (byte < lo || byte > hi) return {SequenceKind::kInvalid, i};
  }
  return {SequenceKind::kValid, num_continuation + 1};
}

bool IsValid(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    // ASCII fast path.
    if (static_cast<uint8_t>(bytes[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Sequence seq = ScanSequence(bytes, pos);
    if (seq.kind != SequenceKind::kValid) return false;
    pos += seq.num_bytes;
  }
  return true;
}

bool AppendLossy(std::string_view bytes, std::string* out) {
  out->reserve(out->size() + bytes.size());
  size_t pos = 0;
  bool truncated = false;
  while (pos < bytes.size()) {
    const Sequence seq = ScanSequence(bytes, pos);
    if (seq.kind == SequenceKind::kValid) {
      out->append(bytes.substr(pos, seq.num_bytes));
    } else {
      out->append(kReplacementChar);
      truncated = seq.kind == SequenceKind::kTruncated;
    }
    pos += seq.num_bytes;
  }
  return truncated;
}

bool EndsWithTruncatedSequence(std::string_view bytes) {
  // A character is at most 4 bytes: only the last 3 bytes can start a truncated one.
  const size_t first = bytes.size() > 3 ? bytes.size() - 3 : 0;
  for (size_t pos = first; pos < bytes.size(); ++pos) {
    const uint8_t byte = static_cast<uint8_t>(bytes[pos]);
    if (byte >= 0x80 && byte < 0xC0) continue;  // a continuation byte cannot start a character
    return ScanSequence(bytes, pos).kind == SequenceKind::kTruncated;
  }
  return false;
}

void AppendCodepoint(char32_t codepoint, std::string* out) {
  if (codepoint < 0x80) {
    out->push_back(static_cast<char>(codepoint));
  } else if (codepoint < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (codepoint >> 6)));
    out->push_back(static_cast<char>(0x80 | (codepoint & 0x3F)));
  } else if (codepoint < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (codepoint >> 12)));
    out->push_back(static_cast<char>(0x80 | ((codepoint >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (codepoint & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (codepoint >> 18)));
    out->push_back(static_cast<char>(0x80 | ((codepoint >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((codepoint >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (codepoint & 0x3F)));
  }
}

char32_t DecodeAt(std::string_view text, size_t* pos) {
  const uint8_t lead = static_cast<uint8_t>(text[*pos]);
  const size_t length = CharLength(lead);
  char32_t codepoint = length == 1   ? lead
                       : length == 2 ? (lead & 0x1F)
                       : length == 3 ? (lead & 0x0F)
                                     : (lead & 0x07);
  for (size_t i = 1; i < length; ++i) {
    codepoint = (codepoint << 6) | (static_cast<uint8_t>(text[*pos + i]) & 0x3F);
  }
  *pos += length;
  return codepoint;
}

}  // namespace baton::runtime::utf8
