#include "runtime/tokenizer/jinja/parser.h"

#include <initializer_list>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "runtime/tokenizer/absl_compat.h"

namespace baton::runtime::jinja {
namespace {

using T = Token::Type;

ExprPtr MakeExpr(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

// Tags of jinja2 that no chat template we know of needs; named in the error so that a template
// author sees what to change.
constexpr std::string_view kUnsupportedTags[] = {
    "include", "import", "from", "extends", "block", "raw", "with", "do", "autoescape", "trans"};

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
  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Peek(size_t n = 1) const {
    return tokens_[std::min(pos_ + n, tokens_.size() - 1)];
  }
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
    return absl::InvalidArgumentError(absl::StrCat("chat template line ", line, ": ", ToAbsl(what)));
  }
  std::string Describe(const Token& t) const {
    switch (t.type) {
      case T::kEof: return "end of template";
      case T::kVariableEnd: return "'}}'";
      case T::kBlockEnd: return "'%}'";
      case T::kText: return "template text";
      case T::kString: return "string literal";
      default: return "'" + t.text + "'";
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
    if (!SkipOp(op)) return Error(absl::StrCat("expected '", ToAbsl(op), "', got ", Describe(Cur())));
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectNameToken() {
    if (Cur().type != T::kName) return Error(absl::StrCat("expected a name, got ", Describe(Cur())));
    std::string name = Cur().text;
    Next();
    return name;
  }

  // Counts nesting on entry and releases it on exit, so a template like "((((...))))" nested
  // thousands deep fails instead of overflowing the stack.
  class DepthGuard {
   public:
    explicit DepthGuard(Parser* p) : p_(p) { ++p_->depth_; }
    ~DepthGuard() { --p_->depth_; }
    absl::Status Check() const {
      if (p_->depth_ > kMaxParseDepth) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "chat template line ", p_->Cur().line, ": nesting deeper than ", kMaxParseDepth));
      }
      return absl::OkStatus();
    }

   private:
    Parser* p_;
  };

  // Parses statements into *out until a `{% name %}` with name in `ends`, which it consumes up to
  // the name and returns; "" at the end of the template (an error when `ends` is not empty).
  absl::StatusOr<std::string> ParseBody(std::initializer_list<std::string_view> ends,
                                        StmtList* out) {
    DepthGuard guard(this);
    RETURN_IF_ERROR(guard.Check());
    while (true) {
      const Token& t = Cur();
      if (t.type == T::kEof) {
        if (ends.size() == 0) return std::string();
        return Error(absl::StrCat("missing '{% ", ToAbsl(*(ends.end() - 1)), " %}'"));
      }
      if (t.type == T::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->line = t.line;
        s->text = t.text;
        out->push_back(std::move(s));
        Next();
      } else if (t.type == T::kVariableBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->line = t.line;
        Next();
        ASSIGN_OR_RETURN(s->expr, ParseTuple(true, false, {}));
        RETURN_IF_ERROR(Expect(T::kVariableEnd, "'}}'"));
        out->push_back(std::move(s));
      } else if (t.type == T::kBlockBegin) {
        Next();
        if (Cur().type != T::kName) return Error("expected a tag name after '{%'");
        std::string name = Cur().text;
        for (std::string_view end : ends) {
          if (name == end) {
            Next();
            return name;
          }
        }
        ASSIGN_OR_RETURN(auto stmt, ParseStatement());
        out->push_back(std::move(stmt));
      } else {
        return Error(absl::StrCat("unexpected ", Describe(t)));
      }
    }
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseStatement() {
    auto s = std::make_unique<Stmt>();
    s->line = Cur().line;
    std::string tag = Cur().text;
    Next();
    if (tag == "if") return ParseIf(std::move(s));
    if (tag == "for") return ParseFor(std::move(s));
    if (tag == "set") return ParseSet(std::move(s));
    if (tag == "macro") return ParseMacro(std::move(s));
    if (tag == "filter") return ParseFilterBlock(std::move(s));
    if (tag == "generation") {
      s->kind = Stmt::Kind::kGeneration;
      RETURN_IF_ERROR(Expect(T::kBlockEnd, "'%}'"));
      ASSIGN_OR_RETURN(std::string end, ParseBody({"endgeneration"}, &s->body));
      RETURN_IF_ERROR(Expect(T::kBlockEnd, "'%}'"));
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) {
        return ErrorAt(s->line, absl::StrCat("'", tag, "' outside of a for loop"));
      }
      s->kind = tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      RETURN_IF_ERROR(Expect(T::kBlockEnd, "'%}'"));
      return s;
    }
    for (std::string_view unsupported : kUnsupportedTags) {
      if (tag == unsupported) return ErrorAt(s->line, absl::StrCat("unsupported tag '", tag, "'"));
    }
    return ErrorAt(s->line, absl::StrCat("unknown tag '", tag, "'"));
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseIf(std::unique_ptr<Stmt> s) {
    s->kind = Stmt::Kind::kIf;
    while (true) {
      ASSIGN_OR_RETURN(ExprPtr cond, ParseTuple(false, false, {}));
      RETURN_IF_ERROR(Expect(T::kBlockEnd, "'%}'"));
      s->conditions.push_back(std::move(cond));
      s->bodies.emplace_back();
      ASSIGN_OR_RETURN(std::string end, ParseBody({"elif", "else", "endif"}, &s->bodies.back()));
      if (end == "elif") continue;
      if (end == "else") {
        RETURN_IF_ERROR(Expect(T::kBlockEnd, "'%}'"));
        ASSIGN_OR_RETURN(end, ParseBody({"endif"}, &s->else_body));
      }
      RETURN_IF_ERROR(Expect(T::kBlockEnd, "'%}'"));
      return s;
    }
  }

  absl::StatusOr<AssignTarget> ParseAssignTarget(bool allow_attribute) {
    AssignTarget target;
    bool parenthesized = SkipOp("(");
    ASSIGN_OR_RETURN(std::string first, ExpectNameToken());
    target.names.push_back(first);
    if (allow_attribute && !parenthesized && SkipOp(".")) {
      ASSIGN_OR_RETURN(target.attribute, ExpectNameToken());
      return target;
    }
    while (SkipOp(",")) {
      target.is_tuple = true;
      if (Cur().type != T::kName || IsName("in")) break;
      ASSIGN_OR_RETURN(std::string name, ExpectNameToken());
      target.names.push_back(name);
    }
    if (parenthesized) {
      RETURN_IF_ERROR(ExpectOp(")"));
      target.is_tuple = true;
    }
    return target;
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseFor(std::unique_ptr<Stmt> s) {
    s->kind = Stmt::Kind::kFor;
    ASSIGN_OR_RETURN(s->target, ParseAssignTarget(false));
    if (!SkipName("in")) return Error("expected 'in' in for loop");
    ASSIGN_OR_RETURN(s->expr, ParseTuple(false, false, {"recursive", "if"}));
    if (SkipName("if")) {
      ASSIGN_OR_RETURN(s->condition, ParseExpression(true));
    }
    if (IsName("recursive")) return Error("unsupported construct 'recursive' loop");
    RETURN_IF_ERROR(Expect(T::kBlockEnd, "'%}'"));
    ++loop_depth_;
    absl::StatusOr<std::string> end = ParseBody({"else", "endfor"}, &s->body);
    --loop_depth_;
    if (!end.ok()) return end.status();
    if (*end == "else") {
      RETURN_IF_ERROR(Expect(T::kBlockEnd, "'%}'"));
      ASSIGN_OR_RETURN(std::string end2, ParseBody({"endfor"}, &s->else_body));
    }
    RETURN_IF_ERROR(Expect(T::kBlockEnd, "'%}'"));
    return s;
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseSet(std::unique_ptr<Stmt> s) {
    ASSIGN_OR_RETURN(s->target, ParseAssignTarget(true));
    if (SkipOp("=")) {
      s->kind = Stmt::Kind::kSet;
      ASSIGN_OR_RETURN(s->expr, ParseTuple(true, false, {}));
      RETURN_IF_ERROR(Expect(T::kBlockEnd, "'%}'"));
      return s;
    }
    s->kind = Stmt::Kind::kSetBlock;
    if (s->target.is_tuple) return Error("a block set assigns one name");
    RETURN_IF_ERROR(ParseFilterChain(&s->filters));
    RETURN_IF_ERROR(Expect(T::kBlockEnd, "'%}'"));
    ASSIGN_OR_RETURN(std::string end, ParseBody({"endset"}, &s->body));
    RETURN_IF_ERROR(Expect(T::kBlockEnd, "'%}'"));
    return s;
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseMacro(std::unique_ptr<Stmt> s) {
    s->kind = Stmt::Kind::kMacro;
    ASSIGN_OR_RETURN(s->name, ExpectNameToken());
    RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      if (!s->params.empty()) RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(")")) break;
      MacroParam param;
      ASSIGN_OR_RETURN(param.name, ExpectNameToken());
      if (SkipOp("=")) {
        ASSIGN_OR_RETURN(param.default_value, ParseExpression(true));
      }
      s->params.push_back(std::move(param));
    }
    Next();
    RETURN_IF_ERROR(Expect(T::kBlockEnd, "'%}'"));
    // A loop around the macro's definition does not make `break` valid inside its body.
    int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    absl::StatusOr<std::string> end = ParseBody({"endmacro"}, &s->body);
    loop_depth_ = saved_loop_depth;
    if (!end.ok()) return end.status();
    if (Cur().type == T::kName && Cur().text == s->name) Next();
    RETURN_IF_ERROR(Expect(T::kBlockEnd, "'%}'"));
    return s;
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseFilterBlock(std::unique_ptr<Stmt> s) {
    s->kind = Stmt::Kind::kFilterBlock;
    if (Cur().type != T::kName) return Error("expected a filter name");
    RETURN_IF_ERROR(ParseFilterChain(&s->filters, /*first_without_pipe=*/true));
    RETURN_IF_ERROR(Expect(T::kBlockEnd, "'%}'"));
    ASSIGN_OR_RETURN(std::string end, ParseBody({"endfilter"}, &s->body));
    RETURN_IF_ERROR(Expect(T::kBlockEnd, "'%}'"));
    return s;
  }

  // `| f(args) | g` applied to a value that is supplied later (args[0] stays null).
  absl::Status ParseFilterChain(std::vector<ExprPtr>* filters, bool first_without_pipe = false) {
    while (first_without_pipe || SkipOp("|")) {
      first_without_pipe = false;
      ASSIGN_OR_RETURN(ExprPtr f, ParseFilterCall(nullptr));
      filters->push_back(std::move(f));
    }
    return absl::OkStatus();
  }

  // ---- expressions ----

  bool AtTupleEnd(std::initializer_list<std::string_view> extra_end_names) const {
    if (Cur().type == T::kVariableEnd || Cur().type == T::kBlockEnd || IsOp(")")) return true;
    for (std::string_view name : extra_end_names) {
      if (IsName(name)) return true;
    }
    return false;
  }

  // jinja2's parse_tuple: `a`, or `a, b` as a tuple.
  absl::StatusOr<ExprPtr> ParseTuple(bool with_condexpr, bool explicit_parens,
                                     std::initializer_list<std::string_view> extra_end_names) {
    int line = Cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) RETURN_IF_ERROR(ExpectOp(","));
      if (AtTupleEnd(extra_end_names)) break;
      ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(with_condexpr));
      items.push_back(std::move(item));
      if (IsOp(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) return Error(absl::StrCat("expected an expression, got ", Describe(Cur())));
    }
    ExprPtr tuple = MakeExpr(Expr::Kind::kTuple, line);
    tuple->args = std::move(items);
    return tuple;
  }

  absl::StatusOr<ExprPtr> ParseExpression(bool with_condexpr) {
    DepthGuard guard(this);
    RETURN_IF_ERROR(guard.Check());
    if (!with_condexpr) return ParseOr();
    ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
    while (IsName("if")) {
      int line = Cur().line;
      Next();
      ExprPtr cond_expr = MakeExpr(Expr::Kind::kConditional, line);
      ASSIGN_OR_RETURN(ExprPtr cond, ParseOr());
      ExprPtr otherwise;
      if (SkipName("else")) {
        ASSIGN_OR_RETURN(otherwise, ParseExpression(true));
      }
      cond_expr->args.push_back(std::move(cond));
      cond_expr->args.push_back(std::move(expr));
      cond_expr->args.push_back(std::move(otherwise));
      expr = std::move(cond_expr);
    }
    return expr;
  }

  absl::StatusOr<ExprPtr> ParseBinaryChain(std::initializer_list<std::string_view> ops,
                                           bool ops_are_names,
                                           absl::StatusOr<ExprPtr> (Parser::*operand)()) {
    ASSIGN_OR_RETURN(ExprPtr left, (this->*operand)());
    while (true) {
      std::string op;
      for (std::string_view candidate : ops) {
        if (ops_are_names ? IsName(candidate) : IsOp(candidate)) op = std::string(candidate);
      }
      if (op.empty()) return left;
      int line = Cur().line;
      Next();
      ASSIGN_OR_RETURN(ExprPtr right, (this->*operand)());
      ExprPtr bin = MakeExpr(Expr::Kind::kBinary, line);
      bin->name = op;
      bin->args.push_back(std::move(left));
      bin->args.push_back(std::move(right));
      left = std::move(bin);
    }
  }

  absl::StatusOr<ExprPtr> ParseOr() { return ParseBinaryChain({"or"}, true, &Parser::ParseAnd); }
  absl::StatusOr<ExprPtr> ParseAnd() { return ParseBinaryChain({"and"}, true, &Parser::ParseNot); }

  absl::StatusOr<ExprPtr> ParseNot() {
    if (IsName("not")) {
      int line = Cur().line;
      Next();
      DepthGuard guard(this);
      RETURN_IF_ERROR(guard.Check());
      ExprPtr e = MakeExpr(Expr::Kind::kUnary, line);
      e->name = "not";
      ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
      e->args.push_back(std::move(operand));
      return e;
    }
    return ParseCompare();
  }

  absl::StatusOr<ExprPtr> ParseCompare() {
    int line = Cur().line;
    ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (IsOp("==") || IsOp("!=") || IsOp("<") || IsOp("<=") || IsOp(">") || IsOp(">=")) {
        op = Cur().text;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && Peek().type == T::kName && Peek().text == "in") {
        op = "not in";
        Next();
        Next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = MakeExpr(Expr::Kind::kCompare, line);
        cmp->args.push_back(std::move(first));
      }
      ASSIGN_OR_RETURN(ExprPtr operand, ParseMath1());
      cmp->ops.push_back(op);
      cmp->args.push_back(std::move(operand));
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  absl::StatusOr<ExprPtr> ParseMath1() {
    return ParseBinaryChain({"+", "-"}, false, &Parser::ParseConcat);
  }
  absl::StatusOr<ExprPtr> ParseConcat() {
    return ParseBinaryChain({"~"}, false, &Parser::ParseMath2);
  }
  absl::StatusOr<ExprPtr> ParseMath2() {
    return ParseBinaryChain({"*", "/", "//", "%"}, false, &Parser::ParsePow);
  }
  absl::StatusOr<ExprPtr> ParsePow() {
    return ParseBinaryChain({"**"}, false, &Parser::ParseUnaryWithFilters);
  }
  absl::StatusOr<ExprPtr> ParseUnaryWithFilters() { return ParseUnary(true); }

  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter) {
    DepthGuard guard(this);
    RETURN_IF_ERROR(guard.Check());
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      node = MakeExpr(Expr::Kind::kUnary, Cur().line);
      node->name = Cur().text;
      Next();
      ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
      node->args.push_back(std::move(operand));
    } else {
      ASSIGN_OR_RETURN(node, ParsePrimary());
    }
    ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
    if (!with_filter) return node;
    // Filters, tests and calls chain in any order: `x|f is t`, `x|f(1)`.
    while (true) {
      if (SkipOp("|")) {
        ASSIGN_OR_RETURN(node, ParseFilterCall(std::move(node)));
      } else if (IsName("is")) {
        Next();
        ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
      } else if (IsOp("(")) {
        ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  absl::StatusOr<ExprPtr> ParseFilterCall(ExprPtr input) {
    ExprPtr f = MakeExpr(Expr::Kind::kFilter, Cur().line);
    ASSIGN_OR_RETURN(f->name, ExpectNameToken());
    while (SkipOp(".")) {
      ASSIGN_OR_RETURN(std::string part, ExpectNameToken());
      f->name += "." + part;
    }
    f->args.push_back(std::move(input));
    if (IsOp("(")) RETURN_IF_ERROR(ParseCallArgs(f.get()));
    return f;
  }

  absl::StatusOr<ExprPtr> ParseTest(ExprPtr input) {
    ExprPtr t = MakeExpr(Expr::Kind::kTest, Cur().line);
    t->negated = SkipName("not");
    ASSIGN_OR_RETURN(t->name, ExpectNameToken());
    t->args.push_back(std::move(input));
    if (IsOp("(")) {
      RETURN_IF_ERROR(ParseCallArgs(t.get()));
    } else if ((Cur().type == T::kName || Cur().type == T::kString || Cur().type == T::kInteger ||
                Cur().type == T::kFloat || IsOp("(") || IsOp("[") || IsOp("{")) &&
               !IsName("else") && !IsName("or") && !IsName("and")) {
      if (IsName("is")) return Error("cannot chain multiple tests with 'is'");
      // `x is divisibleby 3`, `x is sameas none`: one argument without parentheses.
      ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
      ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
      t->args.push_back(std::move(arg));
    }
    return t;
  }

  absl::StatusOr<ExprPtr> ParseCall(ExprPtr callee) {
    ExprPtr c = MakeExpr(Expr::Kind::kCall, Cur().line);
    c->args.push_back(std::move(callee));
    RETURN_IF_ERROR(ParseCallArgs(c.get()));
    return c;
  }

  // `(a, b, key=c)`; appends to e->args and e->kwargs.
  absl::Status ParseCallArgs(Expr* e) {
    RETURN_IF_ERROR(ExpectOp("("));
    bool first = true;
    while (!IsOp(")")) {
      if (!first) {
        RETURN_IF_ERROR(ExpectOp(","));
        if (IsOp(")")) break;
      }
      first = false;
      if (IsOp("*") || IsOp("**")) return Error("unsupported construct '*args' in a call");
      if (Cur().type == T::kName && Peek().type == T::kOperator && Peek().text == "=") {
        std::string key = Cur().text;
        Next();
        Next();
        ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        e->kwargs.emplace_back(key, std::move(value));
      } else {
        if (!e->kwargs.empty()) return Error("positional argument after a keyword argument");
        ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        e->args.push_back(std::move(value));
      }
    }
    Next();
    return absl::OkStatus();
  }

  absl::StatusOr<ExprPtr> ParsePrimary() {
    const Token& t = Cur();
    int line = t.line;
    if (t.type == T::kName) {
      ExprPtr e = MakeExpr(Expr::Kind::kLiteral, line);
      if (t.text == "true" || t.text == "True") {
        e->value = Value::Bool(true);
      } else if (t.text == "false" || t.text == "False") {
        e->value = Value::Bool(false);
      } else if (t.text == "none" || t.text == "None") {
        e->value = Value::None();
      } else {
        e->kind = Expr::Kind::kName;
        e->name = t.text;
      }
      Next();
      return e;
    }
    if (t.type == T::kString) {
      // Adjacent literals concatenate, as in Python: "a" "b".
      std::string text;
      while (Cur().type == T::kString) {
        text += Cur().text;
        Next();
      }
      ExprPtr e = MakeExpr(Expr::Kind::kLiteral, line);
      e->value = Value::String(std::move(text));
      return e;
    }
    if (t.type == T::kInteger || t.type == T::kFloat) {
      ExprPtr e = MakeExpr(Expr::Kind::kLiteral, line);
      e->value = t.type == T::kInteger ? Value::Int(t.int_value) : Value::Float(t.float_value);
      Next();
      return e;
    }
    if (SkipOp("(")) {
      ASSIGN_OR_RETURN(ExprPtr inner, ParseTuple(true, true, {}));
      RETURN_IF_ERROR(ExpectOp(")"));
      return inner;
    }
    if (SkipOp("[")) {
      ExprPtr list = MakeExpr(Expr::Kind::kList, line);
      while (!IsOp("]")) {
        if (!list->args.empty()) {
          RETURN_IF_ERROR(ExpectOp(","));
          if (IsOp("]")) break;
        }
        ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
        list->args.push_back(std::move(item));
      }
      Next();
      return list;
    }
    if (SkipOp("{")) {
      ExprPtr dict = MakeExpr(Expr::Kind::kDict, line);
      while (!IsOp("}")) {
        if (!dict->args.empty()) {
          RETURN_IF_ERROR(ExpectOp(","));
          if (IsOp("}")) break;
        }
        ASSIGN_OR_RETURN(ExprPtr key, ParseExpression(true));
        RETURN_IF_ERROR(ExpectOp(":"));
        ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
        dict->args.push_back(std::move(key));
        dict->args.push_back(std::move(value));
      }
      Next();
      return dict;
    }
    return Error(absl::StrCat("unexpected ", Describe(t)));
  }

  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node) {
    while (true) {
      int line = Cur().line;
      if (SkipOp(".")) {
        if (Cur().type == T::kInteger) {
          ExprPtr item = MakeExpr(Expr::Kind::kGetItem, line);
          ExprPtr index = MakeExpr(Expr::Kind::kLiteral, line);
          index->value = Value::Int(Cur().int_value);
          Next();
          item->args.push_back(std::move(node));
          item->args.push_back(std::move(index));
          node = std::move(item);
          continue;
        }
        ExprPtr attr = MakeExpr(Expr::Kind::kGetAttr, line);
        ASSIGN_OR_RETURN(attr->name, ExpectNameToken());
        attr->args.push_back(std::move(node));
        node = std::move(attr);
      } else if (SkipOp("[")) {
        ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node), line));
        RETURN_IF_ERROR(ExpectOp("]"));
      } else if (IsOp("(")) {
        ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr node, int line) {
    ExprPtr start;
    if (!IsOp(":")) {
      ASSIGN_OR_RETURN(start, ParseExpression(true));
      if (!IsOp(":")) {
        ExprPtr item = MakeExpr(Expr::Kind::kGetItem, line);
        item->args.push_back(std::move(node));
        item->args.push_back(std::move(start));
        return item;
      }
    }
    Next();  // ':'
    ExprPtr stop, step;
    if (!IsOp("]") && !IsOp(":")) {
      ASSIGN_OR_RETURN(stop, ParseExpression(true));
    }
    if (SkipOp(":") && !IsOp("]")) {
      ASSIGN_OR_RETURN(step, ParseExpression(true));
    }
    ExprPtr slice = MakeExpr(Expr::Kind::kSlice, line);
    slice->args.push_back(std::move(node));
    slice->args.push_back(std::move(start));
    slice->args.push_back(std::move(stop));
    slice->args.push_back(std::move(step));
    return slice;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

absl::StatusOr<StmtList> Parse(std::vector<Token> tokens) {
  return Parser(std::move(tokens)).ParseTemplate();
}

}  // namespace baton::runtime::jinja
