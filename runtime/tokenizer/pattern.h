// What Split pre-tokenizers and Replace normalizers/decoders search for (a literal string, a regex or
// a character class), and the five ways `tokenizers` turns matches into pieces.
// Immutable after construction; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "runtime/tokenizer/json_fields.h"
#include "runtime/tokenizer/regex.h"

namespace baton::runtime {

// A run of the searched text, [begin, end) in bytes, that is or is not a match.
struct Segment {
  size_t begin;
  size_t end;
  bool is_match;
};

class Pattern {
 public:
  enum class CharClass { kNumeric, kWhitespace };

  static Pattern Literal(std::string literal);
  static Pattern FromRegex(Regex regex);
  static Pattern SingleChar(char32_t c);
  static Pattern OfClass(CharClass char_class);

  // {"String": "..."} or {"Regex": "..."}.
  static absl::StatusOr<Pattern> FromJson(const nlohmann::json& json, const JsonPath& at);

  // Segments that cover `text` (valid UTF-8) in order. A literal or regex match is one segment; a
  // character pattern makes one segment per matching character; the text between matches forms
  // one non-match segment. Empty text gives one empty non-match segment.
  std::vector<Segment> Find(std::string_view text) const;

 private:
  enum class Kind { kLiteral, kRegex, kChar, kCharClass };
  explicit Pattern(Kind kind) : kind_(kind) {}

  bool CharMatches(char32_t c) const;

  Kind kind_;
  std::string literal_;
  std::optional<Regex> regex_;
  char32_t char_ = 0;
  CharClass char_class_ = CharClass::kNumeric;
};

// tokenizers' SplitDelimiterBehavior.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// "Removed", "Isolated", "MergedWithPrevious", "MergedWithNext" or "Contiguous".
absl::StatusOr<SplitBehavior> ParseSplitBehavior(const nlohmann::json& json, const JsonPath& at);

struct Span {
  size_t begin;
  size_t end;
};

// Turns the segments of Pattern::Find into the pieces a split keeps, dropping empty ones.
// `invert` swaps matches and non-matches first (the Split pre-tokenizer's "invert").
std::vector<Span> SplitSegments(std::vector<Segment> segments, SplitBehavior behavior, bool invert);

// `text` with every match of `pattern` replaced by `content`.
std::string ReplaceAll(std::string_view text, const Pattern& pattern, std::string_view content);

// The "Replace" step that normalizers and decoders share: {"pattern": ..., "content": "..."}.
struct ReplaceStep {
  Pattern pattern;
  std::string content;

  std::string Apply(std::string_view text) const { return ReplaceAll(text, pattern, content); }
};
absl::StatusOr<ReplaceStep> ParseReplaceStep(const nlohmann::json& json, const JsonPath& at);

}  // namespace baton::runtime
