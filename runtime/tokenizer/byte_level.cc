#include "runtime/tokenizer/byte_level.h"

#include <array>

#include "runtime/tokenizer/utf8.h"

namespace baton::runtime::byte_level {
namespace {

struct Tables {
  std::array<char32_t, 256> byte_to_char;
  std::array<std::string, 256> byte_to_utf8;
  std::array<int16_t, 512> char_to_byte;  // every mapped code point is below U+0200; -1 = none
};

bool StandsForItself(int byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

const Tables& GetTables() {
  static const Tables tables = [] {
    Tables t;
    t.char_to_byte.fill(-1);
    char32_t next_extra = 256;
    for (int byte = 0; byte < 256; ++byte) {
      const char32_t c = StandsForItself(byte) ? static_cast<char32_t>(byte) : next_extra++;
      t.byte_to_char[byte] = c;
      utf8::AppendCodepoint(c, &t.byte_to_utf8[byte]);
      t.char_to_byte[c] = static_cast<int16_t>(byte);
    }
    return t;
  }();
  return tables;
}

}  // namespace

char32_t ByteToChar(uint8_t byte) { return GetTables().byte_to_char[byte]; }

std::optional<uint8_t> CharToByte(char32_t c) {
  const Tables& tables = GetTables();
  if (c >= tables.char_to_byte.size() || tables.char_to_byte[c] < 0) return std::nullopt;
  return static_cast<uint8_t>(tables.char_to_byte[c]);
}

void AppendEncoded(std::string_view bytes, std::string* out) {
  const Tables& tables = GetTables();
  out->reserve(out->size() + 2 * bytes.size());
  for (char byte : bytes) out->append(tables.byte_to_utf8[static_cast<uint8_t>(byte)]);
}

bool AppendDecoded(std::string_view token, std::string* out) {
  const size_t old_size = out->size();
  size_t pos = 0;
  while (pos < token.size()) {
    const std::optional<uint8_t> byte = CharToByte(utf8::DecodeAt(token, &pos));
    if (!byte.has_value()) {
      out->resize(old_size);
      return false;
    }
    out->push_back(static_cast<char>(*byte));
  }
  return true;
}

}  // namespace baton::runtime::byte_level
