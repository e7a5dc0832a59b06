#include "runtime/tokenizer/unicode.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "kernels/common/check.h"
#include "runtime/tokenizer/utf8.h"

namespace baton::runtime::unicode {
namespace {

bool IsAscii(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

const icu::Normalizer2* GetNormalizer(NormalizationForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = nullptr;
  switch (form) {
    case NormalizationForm::kNfc: normalizer = icu::Normalizer2::getNFCInstance(status); break;
    case NormalizationForm::kNfd: normalizer = icu::Normalizer2::getNFDInstance(status); break;
    case NormalizationForm::kNfkc: normalizer = icu::Normalizer2::getNFKCInstance(status); break;
    case NormalizationForm::kNfkd: normalizer = icu::Normalizer2::getNFKDInstance(status); break;
  }
  // The instances are built into ICU's data: a failure means a broken installation.
  BATON_CHECK(U_SUCCESS(status) && normalizer != nullptr);
  return normalizer;
}

}  // namespace

bool IsWhitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE);
}

bool IsWordChar(char32_t c) {
  if (c < 0x80) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  }
  const UChar32 cp = static_cast<UChar32>(c);
  if (u_hasBinaryProperty(cp, UCHAR_ALPHABETIC) || u_hasBinaryProperty(cp, UCHAR_JOIN_CONTROL)) {
    return true;
  }
  const int8_t category = u_charType(cp);
  return category == U_NON_SPACING_MARK || category == U_COMBINING_SPACING_MARK ||
         category == U_ENCLOSING_MARK || category == U_DECIMAL_DIGIT_NUMBER ||
         category == U_CONNECTOR_PUNCTUATION;
}

bool IsNumeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const int8_t category = u_charType(static_cast<UChar32>(c));
  return category == U_DECIMAL_DIGIT_NUMBER || category == U_LETTER_NUMBER ||
         category == U_OTHER_NUMBER;
}

std::string Normalize(std::string_view text, NormalizationForm form) {
  if (IsAscii(text)) return std::string(text);  // ASCII is invariant under every form
  const icu::Normalizer2* normalizer = GetNormalizer(form);
  const icu::UnicodeString source = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  UErrorCode status = U_ZERO_ERROR;
  if (normalizer->isNormalized(source, status) && U_SUCCESS(status)) return std::string(text);
  status = U_ZERO_ERROR;
  const icu::UnicodeString normalized = normalizer->normalize(source, status);
  BATON_CHECK(U_SUCCESS(status));
  std::string out;
  normalized.toUTF8String(out);
  return out;
}

std::string Lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t begin = pos;
    const char32_t c = utf8::DecodeAt(text, &pos);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c));
      continue;
    }
    // One character at a time, so no context-dependent rule (final sigma) applies.
    icu::UnicodeString one = icu::UnicodeString::fromUTF8(
        icu::StringPiece(text.data() + begin, static_cast<int32_t>(pos - begin)));
    one.toLower(icu::Locale::getRoot());
    one.toUTF8String(out);
  }
  return out;
}

}  // namespace baton::runtime::unicode
