#include "runtime/tokenizer/jinja/py_string.h"

#include <cctype>

#include <unicode/uchar.h>
#include <unicode/ustring.h>

#include "runtime/tokenizer/utf8.h"

namespace baton::runtime::jinja {

std::u32string DecodeUtf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    utf8::Sequence seq = utf8::ScanSequence(s, i);
    if (seq.kind == utf8::SequenceKind::kValid) {
      size_t p = i;
      out.push_back(utf8::DecodeAt(s, &p));
    } else {
      out.push_back(0xFFFD);
    }
    i += seq.num_bytes;
  }
  return out;
}

std::string EncodeUtf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) utf8::AppendCodepoint(c, &out);
  return out;
}

bool IsPyWhitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string PyStrip(std::string_view s, const std::optional<std::string>& chars, bool left,
                    bool right) {
  std::u32string cps = DecodeUtf8(s);
  std::u32string set = chars ? DecodeUtf8(*chars) : std::u32string();
  auto strip = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : IsPyWhitespace(c);
  };
  size_t begin = 0, end = cps.size();
  if (left) {
    while (begin < end && strip(cps[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strip(cps[end - 1])) --end;
  }
  return EncodeUtf8(std::u32string_view(cps).substr(begin, end - begin));
}

std::vector<std::string> PySplit(std::string_view s, const std::optional<std::string>& sep,
                                 int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t hit = s.find(*sep, start);
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(start, hit - start));
      start = hit + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  std::u32string cps = DecodeUtf8(s);
  size_t i = 0;
  while (true) {
    while (i < cps.size() && IsPyWhitespace(cps[i])) ++i;
    if (i == cps.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      // The rest, with trailing whitespace kept, as CPython does.
      out.push_back(EncodeUtf8(std::u32string_view(cps).substr(i)));
      break;
    }
    size_t j = i;
    while (j < cps.size() && !IsPyWhitespace(cps[j])) ++j;
    out.push_back(EncodeUtf8(std::u32string_view(cps).substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<std::string> PyRSplit(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit) {
  if (maxsplit < 0 || !sep) return PySplit(s, sep, maxsplit);
  std::vector<std::string> out;
  size_t end = s.size();
  while (static_cast<int64_t>(out.size()) < maxsplit) {
    if (end < sep->size()) break;
    size_t hit = s.rfind(*sep, end - sep->size());
    if (hit == std::string_view::npos) break;
    out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
    end = hit;
  }
  out.emplace_back(s.substr(0, end));
  return {out.rbegin(), out.rend()};
}

std::string PyReplace(std::string_view s, std::string_view old, std::string_view replacement,
                      int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement between every code point and at both ends.
    std::u32string cps = DecodeUtf8(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out.append(replacement);
        ++done;
      }
      if (i < cps.size()) out += EncodeUtf8(std::u32string_view(&cps[i], 1));
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t hit = s.find(old, start);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(start, hit - start));
    out.append(replacement);
    start = hit + old.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

namespace {

// Full Unicode case mapping through ICU's root locale, which is what CPython's str.upper/lower do
// (no locale tailoring; 'ß'.upper() == 'SS').
std::string MapCase(std::string_view s, bool upper) {
  UErrorCode err = U_ZERO_ERROR;
  std::u16string utf16(s.size() + 1, u'\0');
  int32_t len16 = 0;
  u_strFromUTF8WithSub(utf16.data(), static_cast<int32_t>(utf16.size()), &len16, s.data(),
                       static_cast<int32_t>(s.size()), 0xFFFD, nullptr, &err);
  if (U_FAILURE(err)) return std::string(s);
  std::u16string mapped(static_cast<size_t>(len16) * 3 + 1, u'\0');
  err = U_ZERO_ERROR;
  int32_t mapped_len =
      upper ? u_strToUpper(mapped.data(), static_cast<int32_t>(mapped.size()), utf16.data(), len16, "", &err)
            : u_strToLower(mapped.data(), static_cast<int32_t>(mapped.size()), utf16.data(), len16, "", &err);
  if (U_FAILURE(err)) return std::string(s);
  std::string out(static_cast<size_t>(mapped_len) * 3 + 1, '\0');
  int32_t out_len = 0;
  err = U_ZERO_ERROR;
  u_strToUTF8(out.data(), static_cast<int32_t>(out.size()), &out_len, mapped.data(), mapped_len, &err);
  if (U_FAILURE(err)) return std::string(s);
  out.resize(out_len);
  return out;
}

bool IsCased(char32_t c) { return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_CASED); }

std::string MapOne(char32_t c, bool upper) {
  std::u32string one(1, c);
  return MapCase(EncodeUtf8(one), upper);
}

}  // namespace

std::string PyUpper(std::string_view s) { return MapCase(s, true); }

std::string PyLower(std::string_view s) { return MapCase(s, false); }

std::string PyTitle(std::string_view s) {
  // CPython: a cased character after a cased one is lowered, any other is title-cased.
  std::string out;
  bool previous_cased = false;
  for (char32_t c : DecodeUtf8(s)) {
    bool cased = IsCased(c);
    if (cased) {
      if (previous_cased) {
        out += MapOne(c, false);
      } else {
        std::u32string t(1, static_cast<char32_t>(u_totitle(static_cast<UChar32>(c))));
        out += EncodeUtf8(t);
      }
    } else {
      out += EncodeUtf8(std::u32string(1, c));
    }
    previous_cased = cased;
  }
  return out;
}

std::string PyCapitalize(std::string_view s) {
  std::u32string cps = DecodeUtf8(s);
  if (cps.empty()) return "";
  std::u32string first(1, static_cast<char32_t>(u_totitle(static_cast<UChar32>(cps[0]))));
  return EncodeUtf8(first) + PyLower(EncodeUtf8(std::u32string_view(cps).substr(1)));
}

bool IsWordChar(char32_t c) { return c == '_' || u_isalnum(static_cast<UChar32>(c)); }

size_t PyLength(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++n;
  }
  return n;
}

}  // namespace baton::runtime::jinja
