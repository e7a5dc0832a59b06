#include "runtime/tokenizer/pattern.h"

#include <algorithm>

#include "kernels/common/status_macros.h"
#include "nlohmann/json.hpp"
#include "runtime/tokenizer/absl_compat.h"
#include "runtime/tokenizer/unicode.h"
#include "runtime/tokenizer/utf8.h"

namespace baton::runtime {

Pattern Pattern::Literal(std::string literal) {
  Pattern pattern(Kind::kLiteral);
  pattern.literal_ = std::move(literal);
  return pattern;
}

Pattern Pattern::FromRegex(Regex regex) {
  Pattern pattern(Kind::kRegex);
  pattern.regex_ = std::move(regex);
  return pattern;
}

Pattern Pattern::SingleChar(char32_t c) {
  Pattern pattern(Kind::kChar);
  pattern.char_ = c;
  return pattern;
}

Pattern Pattern::OfClass(CharClass char_class) {
  Pattern pattern(Kind::kCharClass);
  pattern.char_class_ = char_class;
  return pattern;
}

absl::StatusOr<Pattern> Pattern::FromJson(const nlohmann::json& json, const JsonPath& at) {
  if (const nlohmann::json* literal = FindField(json, "String")) {
    if (!literal->is_string()) return at.Child("String").Invalid("expected a string");
    return Literal(literal->get<std::string>());
  }
  if (const nlohmann::json* regex = FindField(json, "Regex")) {
    if (!regex->is_string()) return at.Child("Regex").Invalid("expected a string");
    absl::StatusOr<Regex> compiled = Regex::Compile(regex->get<std::string>());
    if (!compiled.ok()) return at.Child("Regex").Invalid(ToStd(compiled.status().message()));
    return FromRegex(*std::move(compiled));
  }
  return at.Invalid("expected {\"String\": ...} or {\"Regex\": ...}");
}

bool Pattern::CharMatches(char32_t c) const {
  if (kind_ == Kind::kChar) return c == char_;
  return char_class_ == CharClass::kNumeric ? unicode::IsNumeric(c) : unicode::IsWhitespace(c);
}

std::vector<Segment> Pattern::Find(std::string_view text) const {
  std::vector<Segment> segments;
  if (text.empty()) {
    segments.push_back({0, 0, false});
    return segments;
  }
  size_t previous = 0;
  const auto add_match = [&](size_t begin, size_t end) {
    if (begin != previous) segments.push_back({previous, begin, false});
    segments.push_back({begin, end, true});
    previous = end;
  };
  switch (kind_) {
    case Kind::kLiteral: {
      if (literal_.empty()) break;
      size_t pos = text.find(literal_);
      while (pos != std::string_view::npos) {
        add_match(pos, pos + literal_.size());
        pos = text.find(literal_, pos + literal_.size());
      }
      break;
    }
    case Kind::kRegex: {
      std::vector<RegexMatch> matches;
      regex_->FindAll(text, &matches);
      for (const RegexMatch& match : matches) add_match(match.begin, match.end);
      break;
    }
    case Kind::kChar:
    case Kind::kCharClass: {
      size_t pos = 0;
      while (pos < text.size()) {
        const size_t begin = pos;
        if (CharMatches(utf8::DecodeAt(text, &pos))) add_match(begin, pos);
      }
      break;
    }
  }
  if (previous != text.size()) segments.push_back({previous, text.size(), false});
  return segments;
}

absl::StatusOr<SplitBehavior> ParseSplitBehavior(const nlohmann::json& json, const JsonPath& at) {
  if (!json.is_string()) return at.Invalid("expected a split behavior name");
  const std::string name = json.get<std::string>();
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return at.Invalid("unknown split behavior \"" + name + "\"");
}

std::vector<Span> SplitSegments(std::vector<Segment> segments, SplitBehavior behavior,
                                bool invert) {
  if (invert) {
    for (Segment& segment : segments) segment.is_match = !segment.is_match;
  }
  // Only kRemoved drops pieces (its matches); every behavior drops empty pieces.
  struct Piece {
    Span span;
    bool removed;
  };
  std::vector<Piece> pieces;
  pieces.reserve(segments.size());
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Segment& s : segments) pieces.push_back({{s.begin, s.end}, false});
      break;
    case SplitBehavior::kRemoved:
      for (const Segment& s : segments) pieces.push_back({{s.begin, s.end}, s.is_match});
      break;
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const Segment& s : segments) {
        if (s.is_match == previous_match && !pieces.empty()) {
          pieces.back().span.end = s.end;
        } else {
          pieces.push_back({{s.begin, s.end}, false});
        }
        previous_match = s.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Segment& s : segments) {
        if (s.is_match && !previous_match && !pieces.empty()) {
          pieces.back().span.end = s.end;
        } else {
          pieces.push_back({{s.begin, s.end}, false});
        }
        previous_match = s.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous_match = false;
      for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
        if (it->is_match && !previous_match && !pieces.empty()) {
          pieces.back().span.begin = it->begin;
        } else {
          pieces.push_back({{it->begin, it->end}, false});
        }
        previous_match = it->is_match;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
    }
  }
  std::vector<Span> spans;
  spans.reserve(pieces.size());
  for (const Piece& piece : pieces) {
    if (!piece.removed && piece.span.end > piece.span.begin) spans.push_back(piece.span);
  }
  return spans;
}

std::string ReplaceAll(std::string_view text, const Pattern& pattern, std::string_view content) {
  std::string out;
  out.reserve(text.size());
  for (const Segment& segment : pattern.Find(text)) {
    if (segment.is_match) {
      out.append(content);
    } else {
      out.append(text.substr(segment.begin, segment.end - segment.begin));
    }
  }
  return out;
}

absl::StatusOr<ReplaceStep> ParseReplaceStep(const nlohmann::json& json, const JsonPath& at) {
  const nlohmann::json* pattern_json = FindField(json, "pattern");
  if (pattern_json == nullptr) return at.Child("pattern").Invalid("missing");
  ASSIGN_OR_RETURN(Pattern pattern, Pattern::FromJson(*pattern_json, at.Child("pattern")));
  ASSIGN_OR_RETURN(std::string content, ReadString(json, "content", at));
  return ReplaceStep{std::move(pattern), std::move(content)};
}

}  // namespace baton::runtime
