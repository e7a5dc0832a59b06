// GPT-2's byte-to-unicode table: byte-level BPE vocabularies spell every byte as one printable
// character. Printable Latin-1 bytes ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) stand for
// themselves; the other 68 bytes map, in increasing order, to U+0100, U+0101, ...
// Pure functions over a constant table, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace baton::runtime::byte_level {

// The character (as a code point) that spells `byte`.
char32_t ByteToChar(uint8_t byte);

// The byte a character spells, or nullopt for characters outside the table.
std::optional<uint8_t> CharToByte(char32_t c);

// Appends the byte-level spelling of every byte of `bytes` to *out.
void AppendEncoded(std::string_view bytes, std::string* out);

// Appends to *out the bytes spelled by `token` (valid UTF-8) and returns true; if one of its
// characters is outside the table, appends nothing and returns false.
bool AppendDecoded(std::string_view token, std::string* out);

}  // namespace baton::runtime::byte_level
