// Expressions, with jinja2's precedence: or < and < not < comparisons < + - < ~ < * / // % < ** <
// unary - + < filters, `is` tests and calls < postfix (attribute, subscript, slice) < literals.
#include "runtime/tokenizer/jinja/parser_internal.h"

namespace baton::runtime::jinja::parser_internal {

bool Parser::AtTupleEnd(std::initializer_list<std::string_view> extra_end_names) const {
  if (Cur().type == T::kVariableEnd || Cur().type == T::kBlockEnd || IsOp(")")) return true;
  for (std::string_view name : extra_end_names) {
    if (IsName(name)) return true;
  }
  return false;
}

absl::StatusOr<ExprPtr> Parser::ParseTuple(
    bool with_condexpr, bool explicit_parens,
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
    if (!explicit_parens)
      return Error(absl::StrCat("expected an expression, got ", Describe(Cur())));
  }
  ExprPtr tuple = MakeExpr(Expr::Kind::kTuple, line);
  tuple->args = std::move(items);
  return tuple;
}

absl::StatusOr<ExprPtr> Parser::ParseExpression(bool with_condexpr) {
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

absl::StatusOr<ExprPtr> Parser::ParseBinaryChain(std::initializer_list<std::string_view> ops,
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

absl::StatusOr<ExprPtr> Parser::ParseNot() {
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

absl::StatusOr<ExprPtr> Parser::ParseCompare() {
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

absl::StatusOr<ExprPtr> Parser::ParseMath1() {
  return ParseBinaryChain({"+", "-"}, false, &Parser::ParseConcat);
}

absl::StatusOr<ExprPtr> Parser::ParseConcat() {
  return ParseBinaryChain({"~"}, false, &Parser::ParseMath2);
}

absl::StatusOr<ExprPtr> Parser::ParseMath2() {
  return ParseBinaryChain({"*", "/", "//", "%"}, false, &Parser::ParsePow);
}

absl::StatusOr<ExprPtr> Parser::ParsePow() {
  return ParseBinaryChain({"**"}, false, &Parser::ParseUnaryWithFilters);
}

absl::StatusOr<ExprPtr> Parser::ParseUnary(bool with_filter) {
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

absl::StatusOr<ExprPtr> Parser::ParseFilterCall(ExprPtr input) {
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

absl::StatusOr<ExprPtr> Parser::ParseTest(ExprPtr input) {
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

absl::StatusOr<ExprPtr> Parser::ParseCall(ExprPtr callee) {
  ExprPtr c = MakeExpr(Expr::Kind::kCall, Cur().line);
  c->args.push_back(std::move(callee));
  RETURN_IF_ERROR(ParseCallArgs(c.get()));
  return c;
}

absl::Status Parser::ParseCallArgs(Expr *e) {
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

absl::StatusOr<ExprPtr> Parser::ParsePrimary() {
  const Token &t = Cur();
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

absl::StatusOr<ExprPtr> Parser::ParsePostfix(ExprPtr node) {
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

absl::StatusOr<ExprPtr> Parser::ParseSubscript(ExprPtr node, int line) {
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

}  // namespace baton::runtime::jinja::parser_internal
