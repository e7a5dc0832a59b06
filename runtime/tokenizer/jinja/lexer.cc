#include "runtime/tokenizer/jinja/lexer.h"

#include <algorithm>
#include <cctype>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/tokenizer/utf8.h"

namespace baton::runtime::jinja {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

absl::Status LexError(int line, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("chat template line ", line, ": ", absl::string_view(what.data(), what.size())));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python's "unicode-escape" decoding of a string literal's body, which is what jinja2 applies;
// unknown escapes such as "\d" stay as written.
std::string DecodeStringLiteral(std::string_view body) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\' || i + 1 == body.size()) {
      out += c;
      continue;
    }
    char e = body[++i];
    switch (e) {
      case '\n': break;  // line continuation
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x':
      case 'u':
      case 'U': {
        size_t num_digits = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
        char32_t code = 0;
        size_t j = 0;
        for (; j < num_digits && i + 1 + j < body.size(); ++j) {
          int h = HexValue(body[i + 1 + j]);
          if (h < 0) break;
          code = code * 16 + h;
        }
        if (j != num_digits) {  // Python rejects this; keep it literal rather than guess.
          out += '\\';
          out += e;
          break;
        }
        i += num_digits;
        if (code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) code = 0xFFFD;
        utf8::AppendCodepoint(code, &out);
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          char32_t code = e - '0';
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7';
               ++k) {
            code = code * 8 + (body[++i] - '0');
          }
          utf8::AppendCodepoint(code, &out);
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  absl::StatusOr<std::vector<Token>> Run() {
    bool line_starting = true;  // the previous token ended a line (or this is the start)
    bool strip_leading = false;  // the previous tag ended with '-'
    while (pos_ < src_.size()) {
      size_t tag = FindTagStart(pos_);
      std::string text = src_.substr(pos_, tag - pos_);
      if (strip_leading) {
        size_t first = 0;
        while (first < text.size() && IsSpace(text[first])) ++first;
        text.erase(0, first);
        strip_leading = false;
      }
      int text_line = line_;
      line_ += static_cast<int>(std::count(src_.begin() + pos_, src_.begin() + tag, '\n'));
      pos_ = tag;
      if (tag == src_.size()) {
        EmitText(std::move(text), text_line);
        break;
      }
      char kind = src_[tag + 1];
      char sign = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      if (sign == '-') {
        while (!text.empty() && IsSpace(text.back())) text.pop_back();
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: drop the spaces and tabs that are all that precede the tag on its line.
        size_t line_start = text.rfind('\n');
        line_start = line_start == std::string::npos ? 0 : line_start + 1;
        if ((line_start > 0 || line_starting) &&
            text.find_first_not_of(" \t", line_start) == std::string::npos) {
          text.erase(line_start);
        }
      }
      EmitText(std::move(text), text_line);
      pos_ = tag + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      absl::StatusOr<bool> ends_line = kind == '#' ? SkipComment(&strip_leading)
                                                   : LexTag(kind, &strip_leading);
      if (!ends_line.ok()) return ends_line.status();
      line_starting = *ends_line;
    }
    tokens_.push_back(Token{Token::Type::kEof, "", 0, 0, line_});
    return std::move(tokens_);
  }

 private:
  size_t FindTagStart(size_t from) const {
    size_t p = from;
    while ((p = src_.find('{', p)) != std::string::npos) {
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) {
        return p;
      }
      ++p;
    }
    return src_.size();
  }

  void EmitText(std::string text, int line) {
    if (!text.empty()) tokens_.push_back(Token{Token::Type::kText, std::move(text), 0, 0, line});
  }

  // Consumes the tag end at pos_; returns whether what it consumed ends with a newline.
  bool ConsumeEnd(size_t end_len, bool strip, bool trim_newline, bool* strip_leading) {
    pos_ += end_len;
    *strip_leading = strip;
    if (strip) {
      // The whitespace is stripped from the next text; say whether it ends a line, as jinja2's
      // `-%}\s*` match would.
      size_t p = pos_;
      while (p < src_.size() && IsSpace(src_[p])) ++p;
      return p > pos_ && src_[p - 1] == '\n';
    }
    if (trim_newline && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      ++line_;
      return true;
    }
    return false;
  }

  absl::StatusOr<bool> SkipComment(bool* strip_leading) {
    int start_line = line_;
    size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) return LexError(start_line, "unterminated comment");
    line_ += static_cast<int>(std::count(src_.begin() + pos_, src_.begin() + end, '\n'));
    bool strip = end > pos_ && src_[end - 1] == '-';
    pos_ = end;
    return ConsumeEnd(2, strip, true, strip_leading);
  }

  absl::StatusOr<bool> LexTag(char kind, bool* strip_leading) {
    int start_line = line_;
    tokens_.push_back(Token{kind == '{' ? Token::Type::kVariableBegin : Token::Type::kBlockBegin,
                            "", 0, 0, line_});
    const char close = kind == '{' ? '}' : '%';
    int depth = 0;  // open brackets: `}}` inside `{{ {'a': {}} }}` does not end the tag
    while (true) {
      while (pos_ < src_.size() && IsSpace(src_[pos_])) {
        if (src_[pos_] == '\n') ++line_;
        ++pos_;
      }
      if (pos_ >= src_.size()) {
        return LexError(start_line, kind == '{' ? "unterminated '{{'" : "unterminated '{%'");
      }
      if (depth == 0) {
        std::string_view rest = std::string_view(src_).substr(pos_);
        std::string end2 = std::string(1, close) + "}";
        bool strip = rest.substr(0, 1) == "-" && rest.substr(1, 2) == end2;
        bool keep = kind == '%' && rest.substr(0, 1) == "+" && rest.substr(1, 2) == end2;
        if (strip || keep || rest.substr(0, 2) == end2) {
          tokens_.push_back(Token{kind == '{' ? Token::Type::kVariableEnd : Token::Type::kBlockEnd,
                                  "", 0, 0, line_});
          return ConsumeEnd(strip || keep ? 3 : 2, strip, kind == '%' && !keep, strip_leading);
        }
      }
      absl::Status status = LexExpressionToken(&depth);
      if (!status.ok()) return status;
    }
  }

  absl::Status LexExpressionToken(int* depth) {
    char c = src_[pos_];
    if (IsNameStart(c)) {
      size_t end = pos_;
      while (end < src_.size() && IsNameChar(src_[end])) ++end;
      tokens_.push_back(Token{Token::Type::kName, src_.substr(pos_, end - pos_), 0, 0, line_});
      pos_ = end;
      return absl::OkStatus();
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return LexNumber();
    if (c == '\'' || c == '"') return LexString(c);
    static constexpr std::string_view kTwoCharOps[] = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwoCharOps) {
      if (std::string_view(src_).substr(pos_, 2) == op) {
        tokens_.push_back(Token{Token::Type::kOperator, std::string(op), 0, 0, line_});
        pos_ += 2;
        return absl::OkStatus();
      }
    }
    if (std::string_view("+-/*%~[](){}<>=.:|,;").find(c) != std::string_view::npos) {
      if (c == '(' || c == '[' || c == '{') ++*depth;
      if (c == ')' || c == ']' || c == '}') {
        if (*depth == 0) return LexError(line_, absl::StrCat("unexpected '", std::string(1, c), "'"));
        --*depth;
      }
      tokens_.push_back(Token{Token::Type::kOperator, std::string(1, c), 0, 0, line_});
      ++pos_;
      return absl::OkStatus();
    }
    return LexError(line_, absl::StrCat("unexpected character '", std::string(1, c), "'"));
  }

  absl::Status LexNumber() {
    auto digits = [&](size_t p) {
      while (p < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[p])) ||
                                 (src_[p] == '_' && p + 1 < src_.size() &&
                                  std::isdigit(static_cast<unsigned char>(src_[p + 1]))))) {
        ++p;
      }
      return p;
    };
    size_t end = digits(pos_);
    bool is_float = false;
    if (end + 1 < src_.size() && src_[end] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[end + 1]))) {
      end = digits(end + 1);
      is_float = true;
    }
    if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t p = end + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && std::isdigit(static_cast<unsigned char>(src_[p]))) {
        end = digits(p);
        is_float = true;
      }
    }
    std::string text;
    for (size_t p = pos_; p < end; ++p) {
      if (src_[p] != '_') text += src_[p];
    }
    Token token{is_float ? Token::Type::kFloat : Token::Type::kInteger, text, 0, 0, line_};
    if (is_float) {
      token.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      errno = 0;
      token.int_value = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) return LexError(line_, "integer literal out of range");
    }
    tokens_.push_back(std::move(token));
    pos_ = end;
    return absl::OkStatus();
  }

  absl::Status LexString(char quote) {
    int start_line = line_;
    size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != quote) {
      if (src_[p] == '\\') ++p;
      ++p;
    }
    if (p >= src_.size()) return LexError(start_line, "unterminated string literal");
    std::string_view body = std::string_view(src_).substr(pos_ + 1, p - pos_ - 1);
    line_ += static_cast<int>(std::count(body.begin(), body.end(), '\n'));
    tokens_.push_back(Token{Token::Type::kString, DecodeStringLiteral(body), 0, 0, start_line});
    pos_ = p + 1;
    return absl::OkStatus();
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source) {
  // jinja2 reads "\r\n" and "\r" as "\n", and drops one final newline (keep_trailing_newline=False).
  std::string normalized;
  normalized.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      normalized += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      normalized += source[i];
    }
  }
  if (!normalized.empty() && normalized.back() == '\n') normalized.pop_back();
  return Lexer(std::move(normalized)).Run();
}

}  // namespace baton::runtime::jinja
