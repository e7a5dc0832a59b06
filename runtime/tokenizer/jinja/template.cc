#include "runtime/tokenizer/jinja/template.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "runtime/tokenizer/jinja/filters.h"
#include "runtime/tokenizer/jinja/globals.h"
#include "runtime/tokenizer/jinja/lexer.h"
#include "runtime/tokenizer/jinja/parser.h"
#include "runtime/tokenizer/jinja/tests.h"

namespace baton::runtime::jinja {
namespace {

// jinja2 rejects unknown filter and test names when it compiles the template, even in branches
// that never run; so do we.
absl::Status CheckNames(const Expr& e) {
  if (e.kind == Expr::Kind::kFilter && !IsKnownFilter(e.name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("chat template line ", e.line, ": unsupported filter '", e.name, "'"));
  }
  if (e.kind == Expr::Kind::kTest && !IsKnownTest(e.name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("chat template line ", e.line, ": unsupported test '", e.name, "'"));
  }
  for (const auto& arg : e.args) {
    if (arg) RETURN_IF_ERROR(CheckNames(*arg));
  }
  for (const auto& [key, arg] : e.kwargs) RETURN_IF_ERROR(CheckNames(*arg));
  return absl::OkStatus();
}

absl::Status CheckNames(const StmtList& body) {
  for (const auto& s : body) {
    for (const Expr* e : {s->expr.get(), s->condition.get()}) {
      if (e) RETURN_IF_ERROR(CheckNames(*e));
    }
    for (const auto& e : s->conditions) RETURN_IF_ERROR(CheckNames(*e));
    for (const auto& e : s->filters) RETURN_IF_ERROR(CheckNames(*e));
    for (const auto& p : s->params) {
      if (p.default_value) RETURN_IF_ERROR(CheckNames(*p.default_value));
    }
    for (const auto& b : s->bodies) RETURN_IF_ERROR(CheckNames(b));
    RETURN_IF_ERROR(CheckNames(s->body));
    RETURN_IF_ERROR(CheckNames(s->else_body));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Template> Template::Parse(std::string_view source) {
  ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(source));
  ASSIGN_OR_RETURN(StmtList body, jinja::Parse(std::move(tokens)));
  RETURN_IF_ERROR(CheckNames(body));
  return Template(std::make_shared<const StmtList>(std::move(body)));
}

absl::StatusOr<std::string> Template::Render(
    const std::vector<std::pair<std::string, Value>>& variables,
    const RenderOptions& options) const {
  SizeLimits size_limits{options.limits.max_output_bytes, options.limits.max_list_items};
  auto globals = std::make_shared<Scope>();
  for (auto& [name, value] : MakeGlobals(options.now, size_limits)) globals->Set(name, value);
  auto root = std::make_shared<Scope>(globals);
  for (const auto& [name, value] : variables) root->Set(name, value);
  Interpreter interpreter(options.limits);
  return interpreter.Render(*body_, root);
}

}  // namespace baton::runtime::jinja
