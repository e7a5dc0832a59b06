// Statements: the tag grammar ({% if %}, {% for %}, {% set %}, {% macro %}, ...).
#include "runtime/tokenizer/jinja/parser.h"

#include "runtime/tokenizer/jinja/parser_internal.h"

namespace baton::runtime::jinja {
namespace parser_internal {
namespace {

// Tags of jinja2 that no chat template we know of needs; named in the error so that a template
// author sees what to change.
constexpr std::string_view kUnsupportedTags[] = {
    "include", "import", "from", "extends", "block", "raw", "with", "do", "autoescape", "trans"};

}  // namespace

absl::StatusOr<std::string> Parser::ParseBody(std::initializer_list<std::string_view> ends,
                                              StmtList *out) {
  DepthGuard guard(this);
  RETURN_IF_ERROR(guard.Check());
  while (true) {
    const Token &t = Cur();
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

absl::StatusOr<std::unique_ptr<Stmt>> Parser::ParseStatement() {
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

absl::StatusOr<std::unique_ptr<Stmt>> Parser::ParseIf(std::unique_ptr<Stmt> s) {
  s->kind = Stmt::Kind::kIf;
  while (true) {
    ASSIGN_OR_RETURN(ExprPtr cond, ParseTuple(false, false, {}));
    RETURN_IF_ERROR(Expect(T::kBlockEnd, "'%}'"));
    s->conditions.push_back(std::move(cond));
    s->bodies.emplace_back();
    absl::StatusOr<std::string> end = ParseBody({"elif", "else", "endif"}, &s->bodies.back());
    if (!end.ok()) return end.status();
    if (*end == "elif") continue;
    if (*end == "else") {
      RETURN_IF_ERROR(Expect(T::kBlockEnd, "'%}'"));
      ASSIGN_OR_RETURN(end, ParseBody({"endif"}, &s->else_body));
    }
    RETURN_IF_ERROR(Expect(T::kBlockEnd, "'%}'"));
    return s;
  }
}

absl::StatusOr<AssignTarget> Parser::ParseAssignTarget(bool allow_attribute) {
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

absl::StatusOr<std::unique_ptr<Stmt>> Parser::ParseFor(std::unique_ptr<Stmt> s) {
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

absl::StatusOr<std::unique_ptr<Stmt>> Parser::ParseSet(std::unique_ptr<Stmt> s) {
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

absl::StatusOr<std::unique_ptr<Stmt>> Parser::ParseMacro(std::unique_ptr<Stmt> s) {
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

absl::StatusOr<std::unique_ptr<Stmt>> Parser::ParseFilterBlock(std::unique_ptr<Stmt> s) {
  s->kind = Stmt::Kind::kFilterBlock;
  if (Cur().type != T::kName) return Error("expected a filter name");
  RETURN_IF_ERROR(ParseFilterChain(&s->filters, /*first_without_pipe=*/true));
  RETURN_IF_ERROR(Expect(T::kBlockEnd, "'%}'"));
  ASSIGN_OR_RETURN(std::string end, ParseBody({"endfilter"}, &s->body));
  RETURN_IF_ERROR(Expect(T::kBlockEnd, "'%}'"));
  return s;
}

absl::Status Parser::ParseFilterChain(std::vector<ExprPtr> *filters, bool first_without_pipe) {
  while (first_without_pipe || SkipOp("|")) {
    first_without_pipe = false;
    ASSIGN_OR_RETURN(ExprPtr f, ParseFilterCall(nullptr));
    filters->push_back(std::move(f));
  }
  return absl::OkStatus();
}

}  // namespace parser_internal

absl::StatusOr<StmtList> Parse(std::vector<Token> tokens) {
  return parser_internal::Parser(std::move(tokens)).ParseTemplate();
}

}  // namespace baton::runtime::jinja
