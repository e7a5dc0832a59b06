// Splits a template into text and tag tokens, applying whitespace control as transformers'
// environment does: trim_blocks (drop the first newline after `%}` and `#}`), lstrip_blocks (drop
// spaces and tabs before `{%` and `{#` that start a line), `-` on either side of any tag (strip all
// whitespace on that side), `+` (keep it), and keep_trailing_newline=False (drop one trailing
// newline of the template). Comments are dropped here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace baton::runtime::jinja {

struct Token {
  enum class Type {
    kText,           // literal template text, after whitespace control
    kVariableBegin,  // {{
    kVariableEnd,    // }}
    kBlockBegin,     // {%
    kBlockEnd,       // %}
    kName,           // identifiers and keywords: if, for, in, not, true, none, ...
    kString,         // text = the decoded literal
    kInteger,
    kFloat,
    kOperator,  // text = "+", "//", "==", "(", ...
    kEof,
  };
  Type type;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;  // 1-based line in the template source
};

// InvalidArgument("chat template line N: ...") for an unterminated tag, comment or string, or a
// character that starts no token.
absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source);

}  // namespace baton::runtime::jinja
