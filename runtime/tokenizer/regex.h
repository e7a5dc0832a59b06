// A compiled regular expression for the patterns tokenizer.json carries (written for Oniguruma,
// which `tokenizers` uses): PCRE2 in UTF + UCP mode, JIT-compiled, so \p{L}, \p{N}, \s and (?i:...)
// have their Unicode meanings and lookaheads such as \s+(?!\S) work.
// Known difference: PCRE2 treats U+180E as \s, Oniguruma does not.
// A Regex is immutable after Compile; copies share the code; FindAll is thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

struct pcre2_real_code_8;

namespace baton::runtime {

struct RegexMatch {
  size_t begin;  // byte offset of the first matched byte
  size_t end;    // byte offset one past the last matched byte (== begin for an empty match)
};

class Regex {
 public:
  // Returns InvalidArgument (naming the pattern and PCRE2's message) if the pattern does not compile.
  static absl::StatusOr<Regex> Compile(std::string_view pattern);

  // Appends to *matches every match in `text` (valid UTF-8), left to right and non-overlapping.
  // Empty matches follow the Rust `onig` crate's iterator: an empty match at the offset where the
  // previous match ended is skipped, and the search resumes one character further.
  void FindAll(std::string_view text, std::vector<RegexMatch>* matches) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Regex(std::string pattern, std::shared_ptr<pcre2_real_code_8> code)
      : pattern_(std::move(pattern)), code_(std::move(code)) {}

  std::string pattern_;
  std::shared_ptr<pcre2_real_code_8> code_;
};

}  // namespace baton::runtime
