// The parser's class, shared by parser.cc (statements) and expression_parser.cc (expressions).
// Internal to runtime/tokenizer/jinja; use Parse() from parser.h.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "runtime/tokenizer/absl_compat.h"
#include "runtime/tokenizer/jinja/ast.h"
#include "runtime/tokenizer/jinja/lexer.h"
#include "runtime/tokenizer/jinja/parser.h"

namespace baton::runtime::jinja::parser_internal {

using T = Token::Type;

inline ExprPtr MakeExpr(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

// Recursive descent over the lexer's tokens, one method per grammar rule of jinja2's parser.
class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  absl::StatusOr<StmtList> ParseTemplate() {
    StmtList body;
    ASSIGN_OR_RETURN(std::string end, ParseBody({}, &body));
    (void)end;
    return body;
  }

 private:
  const Token &Cur() const { return tokens_[pos_]; }
  const Token &Peek(size_t n = 1) const { return tokens_[std::min(pos_ + n, tokens_.size() - 1)]; }
  void Next() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool IsOp(std::string_view op) const { return Cur().type == T::kOperator && Cur().text == op; }
  bool IsName(std::string_view name) const { return Cur().type == T::kName && Cur().text == name; }
  bool SkipOp(std::string_view op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }
  bool SkipName(std::string_view name) {
    if (!IsName(name)) return false;
    Next();
    return true;
  }

  absl::Status Error(std::string_view what) const { return ErrorAt(Cur().line, what); }
  static absl::Status ErrorAt(int line, std::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("chat template line ", line, ": ", ToAbsl(what)));
  }
  std::string Describe(const Token &t) const {
    switch (t.type) {
      case T::kEof:
        return "end of template";
      case T::kVariableEnd:
        return "'}}'";
      case T::kBlockEnd:
        return "'%}'";
      case T::kText:
        return "template text";
      case T::kString:
        return "string literal";
      default:
        return "'" + t.text + "'";
    }
  }
  absl::Status Expect(T type, std::string_view what) {
    if (Cur().type != type) {
      return Error(absl::StrCat("expected ", ToAbsl(what), ", got ", Describe(Cur())));
    }
    Next();
    return absl::OkStatus();
  }
  absl::Status ExpectOp(std::string_view op) {
    if (!SkipOp(op))
      return Error(absl::StrCat("expected '", ToAbsl(op), "', got ", Describe(Cur())));
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectNameToken() {
    if (Cur().type != T::kName)
      return Error(absl::StrCat("expected a name, got ", Describe(Cur())));
    std::string name = Cur().text;
    Next();
    return name;
  }

  // Counts nesting on entry and releases it on exit, so a template like "((((...))))" nested
  // thousands deep fails instead of overflowing the stack.
  class DepthGuard {
   public:
    explicit DepthGuard(Parser *p) : p_(p) { ++p_->depth_; }
    ~DepthGuard() { --p_->depth_; }
    absl::Status Check() const {
      if (p_->depth_ > kMaxParseDepth) {
        return absl::ResourceExhaustedError(absl::StrCat("chat template line ", p_->Cur().line,
                                                         ": nesting deeper than ", kMaxParseDepth));
      }
      return absl::OkStatus();
    }

   private:
    Parser *p_;
  };

  // Parses statements into *out until a `{% name %}` with name in `ends`, which it consumes up to
  // the name and returns; "" at the end of the template (an error when `ends` is not empty).
  absl::StatusOr<std::string> ParseBody(std::initializer_list<std::string_view> ends,
                                        StmtList *out);

  absl::StatusOr<std::unique_ptr<Stmt>> ParseStatement();

  absl::StatusOr<std::unique_ptr<Stmt>> ParseIf(std::unique_ptr<Stmt> s);

  absl::StatusOr<AssignTarget> ParseAssignTarget(bool allow_attribute);

  absl::StatusOr<std::unique_ptr<Stmt>> ParseFor(std::unique_ptr<Stmt> s);

  absl::StatusOr<std::unique_ptr<Stmt>> ParseSet(std::unique_ptr<Stmt> s);

  absl::StatusOr<std::unique_ptr<Stmt>> ParseMacro(std::unique_ptr<Stmt> s);

  absl::StatusOr<std::unique_ptr<Stmt>> ParseFilterBlock(std::unique_ptr<Stmt> s);

  // `| f(args) | g` applied to a value that is supplied later (args[0] stays null).
  absl::Status ParseFilterChain(std::vector<ExprPtr> *filters, bool first_without_pipe = false);

  // ---- expressions (expression_parser.cc) ----

  bool AtTupleEnd(std::initializer_list<std::string_view> extra_end_names) const;

  // jinja2's parse_tuple: `a`, or `a, b` as a tuple.
  absl::StatusOr<ExprPtr> ParseTuple(bool with_condexpr, bool explicit_parens,
                                     std::initializer_list<std::string_view> extra_end_names);

  absl::StatusOr<ExprPtr> ParseExpression(bool with_condexpr);

  absl::StatusOr<ExprPtr> ParseBinaryChain(std::initializer_list<std::string_view> ops,
                                           bool ops_are_names,
                                           absl::StatusOr<ExprPtr> (Parser::*operand)());

  absl::StatusOr<ExprPtr> ParseOr() { return ParseBinaryChain({"or"}, true, &Parser::ParseAnd); }
  absl::StatusOr<ExprPtr> ParseAnd() { return ParseBinaryChain({"and"}, true, &Parser::ParseNot); }

  absl::StatusOr<ExprPtr> ParseNot();

  absl::StatusOr<ExprPtr> ParseCompare();

  absl::StatusOr<ExprPtr> ParseMath1();
  absl::StatusOr<ExprPtr> ParseConcat();
  absl::StatusOr<ExprPtr> ParseMath2();
  absl::StatusOr<ExprPtr> ParsePow();
  absl::StatusOr<ExprPtr> ParseUnaryWithFilters() { return ParseUnary(true); }

  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter);

  absl::StatusOr<ExprPtr> ParseFilterCall(ExprPtr input);

  absl::StatusOr<ExprPtr> ParseTest(ExprPtr input);

  absl::StatusOr<ExprPtr> ParseCall(ExprPtr callee);

  // `(a, b, key=c)`; appends to e->args and e->kwargs.
  absl::Status ParseCallArgs(Expr *e);

  absl::StatusOr<ExprPtr> ParsePrimary();

  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node);

  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr node, int line);

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace baton::runtime::jinja::parser_internal
