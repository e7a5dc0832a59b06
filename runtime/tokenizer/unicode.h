// Unicode character properties and normalization forms, with the meaning the `tokenizers` library
// (Rust) gives them. Backed by ICU; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace baton::runtime::unicode {

// Rust char::is_whitespace: the White_Space property (includes U+0085 and U+00A0).
bool IsWhitespace(char32_t c);

// Rust regex \w: Alphabetic, marks, decimal numbers, connector punctuation, join controls.
bool IsWordChar(char32_t c);

// Rust char::is_numeric: general categories Nd, Nl and No.
bool IsNumeric(char32_t c);

enum class NormalizationForm { kNfc, kNfd, kNfkc, kNfkd };

// Returns `text` (valid UTF-8) in the given normalization form.
std::string Normalize(std::string_view text, NormalizationForm form);

// Lowercases each character on its own with the full (possibly multi-character) Unicode mapping,
// as Rust's char::to_lowercase does (so a final capital sigma becomes U+03C3, not U+03C2).
std::string Lowercase(std::string_view text);

}  // namespace baton::runtime::unicode
