// Builds the syntax tree from the lexer's tokens, following jinja2's grammar and operator
// precedence (filters and `is` tests bind tighter than arithmetic; `~` sits between + and *).
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/jinja/ast.h"
#include "runtime/tokenizer/jinja/lexer.h"

namespace baton::runtime::jinja {

// InvalidArgument("chat template line N: ...") for a syntax error or a tag this engine does not
// support ("unsupported tag 'include'"); ResourceExhausted when nesting exceeds kMaxParseDepth.
absl::StatusOr<StmtList> Parse(std::vector<Token> tokens);

inline constexpr int kMaxParseDepth = 200;

}  // namespace baton::runtime::jinja
