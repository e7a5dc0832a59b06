// Statements: output, control flow, assignment, macros and the resource guards.
#include "runtime/tokenizer/jinja/interpreter.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "runtime/tokenizer/absl_compat.h"
#include "runtime/tokenizer/jinja/access.h"
#include "runtime/tokenizer/jinja/filters.h"

namespace baton::runtime::jinja {

const Value* Scope::Lookup(std::string_view name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent_.get()) {
    for (const auto& [n, v] : s->vars_) {
      if (n == name) return &v;
    }
  }
  return nullptr;
}

void Scope::Set(std::string_view name, Value value) {
  for (auto& [n, v] : vars_) {
    if (n == name) {
      v = std::move(value);
      return;
    }
  }
  vars_.emplace_back(std::string(name), std::move(value));
}

absl::Status WithLine(absl::Status status, int line) {
  if (status.ok() || status.GetPayload(kRaisedPayload).has_value() ||
      absl::StartsWith(status.message(), "chat template")) {
    return status;
  }
  return absl::Status(status.code(),
                      absl::StrCat("chat template line ", line, ": ", status.message()));
}

Interpreter::Interpreter(const RenderLimits& limits)
    : limits_(limits), size_limits_{limits.max_output_bytes, limits.max_list_items} {}

absl::StatusOr<std::string> Interpreter::Render(const StmtList& body, std::shared_ptr<Scope> root) {
  std::string out;
  out_ = &out;
  absl::StatusOr<Flow> flow = ExecBody(body, root);
  out_ = nullptr;
  if (!flow.ok()) return flow.status();
  return out;
}

absl::Status Interpreter::Emit(std::string_view text) {
  if (out_->size() + text.size() > limits_.max_output_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "chat template: output exceeds ", limits_.max_output_bytes, " bytes"));
  }
  out_->append(text);
  return absl::OkStatus();
}

absl::Status Interpreter::CountIteration(int line) {
  if (++num_iterations_ > limits_.max_iterations) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "chat template line ", line, ": more than ", limits_.max_iterations,
        " loop iterations and macro calls"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Interpreter::Capture(const StmtList& body, const ScopePtr& scope) {
  std::string captured;
  std::string* saved = out_;
  out_ = &captured;
  absl::StatusOr<Flow> flow = ExecBody(body, scope);
  out_ = saved;
  if (!flow.ok()) return flow.status();
  return captured;
}

absl::StatusOr<Interpreter::Flow> Interpreter::ExecBody(const StmtList& body,
                                                        const ScopePtr& scope) {
  for (const auto& stmt : body) {
    absl::StatusOr<Flow> flow = Exec(*stmt, scope);
    if (!flow.ok()) return WithLine(flow.status(), stmt->line);
    if (*flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

absl::StatusOr<Value> Interpreter::ApplyFilterChain(const std::vector<ExprPtr>& filters,
                                                    Value input, const ScopePtr& scope) {
  for (const auto& f : filters) {
    ASSIGN_OR_RETURN(CallArgs args, EvalArgs(*f, 1, scope));
    ASSIGN_OR_RETURN(input, ApplyFilter(f->name, input, args, size_limits_));
  }
  return input;
}

absl::StatusOr<Interpreter::Flow> Interpreter::Exec(const Stmt& stmt, const ScopePtr& scope) {
  switch (stmt.kind) {
    case Stmt::Kind::kText:
      RETURN_IF_ERROR(Emit(stmt.text));
      return Flow::kNormal;
    case Stmt::Kind::kOutput: {
      ASSIGN_OR_RETURN(Value v, Eval(*stmt.expr, scope));
      RETURN_IF_ERROR(Emit(v.Str()));
      return Flow::kNormal;
    }
    case Stmt::Kind::kIf:
      for (size_t i = 0; i < stmt.conditions.size(); ++i) {
        ASSIGN_OR_RETURN(Value cond, Eval(*stmt.conditions[i], scope));
        if (cond.Truthy()) return ExecBody(stmt.bodies[i], scope);
      }
      return ExecBody(stmt.else_body, scope);
    case Stmt::Kind::kFor:
      return ExecFor(stmt, scope);
    case Stmt::Kind::kSet: {
      ASSIGN_OR_RETURN(Value v, Eval(*stmt.expr, scope));
      RETURN_IF_ERROR(ExecSet(stmt, scope, std::move(v)));
      return Flow::kNormal;
    }
    case Stmt::Kind::kSetBlock: {
      ASSIGN_OR_RETURN(std::string text, Capture(stmt.body, std::make_shared<Scope>(scope)));
      ASSIGN_OR_RETURN(Value v, ApplyFilterChain(stmt.filters, Value::String(std::move(text)), scope));
      RETURN_IF_ERROR(ExecSet(stmt, scope, std::move(v)));
      return Flow::kNormal;
    }
    case Stmt::Kind::kMacro:
      scope->Set(stmt.name, MakeMacro(stmt, scope));
      return Flow::kNormal;
    case Stmt::Kind::kFilterBlock: {
      ASSIGN_OR_RETURN(std::string text, Capture(stmt.body, std::make_shared<Scope>(scope)));
      ASSIGN_OR_RETURN(Value v, ApplyFilterChain(stmt.filters, Value::String(std::move(text)), scope));
      RETURN_IF_ERROR(Emit(v.Str()));
      return Flow::kNormal;
    }
    case Stmt::Kind::kGeneration: {
      // transformers records where this text starts and ends for assistant masks; serving only
      // needs the text.
      ASSIGN_OR_RETURN(std::string text, Capture(stmt.body, std::make_shared<Scope>(scope)));
      RETURN_IF_ERROR(Emit(text));
      return Flow::kNormal;
    }
    case Stmt::Kind::kBreak:
      return Flow::kBreak;
    case Stmt::Kind::kContinue:
      return Flow::kContinue;
    default:
      break;
  }
  return absl::InternalError("unknown statement kind");
}

absl::Status Interpreter::BindTarget(const AssignTarget& target, const Value& value, Scope* scope,
                                     int line) {
  if (!target.is_tuple) {
    scope->Set(target.names[0], value);
    return absl::OkStatus();
  }
  if (value.is_undefined()) return UndefinedError(value);
  ASSIGN_OR_RETURN(ValueList items, Iterate(value));
  if (items.size() != target.names.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        items.size() > target.names.size() ? "too many" : "not enough", " values to unpack (expected ",
        target.names.size(), ", got ", items.size(), ")"));
  }
  for (size_t i = 0; i < items.size(); ++i) scope->Set(target.names[i], items[i]);
  (void)line;
  return absl::OkStatus();
}

absl::Status Interpreter::ExecSet(const Stmt& stmt, const ScopePtr& scope, Value value) {
  const AssignTarget& target = stmt.target;
  if (target.attribute.empty()) return BindTarget(target, value, scope.get(), stmt.line);
  const Value* ns = scope->Lookup(target.names[0]);
  if (ns == nullptr || !ns->is_namespace()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot assign attribute on non-namespace object '", target.names[0], "'"));
  }
  // Keeps values acyclic and shallow (see Value::depth()).
  if (value.contains_namespace()) {
    return absl::InvalidArgumentError("a namespace cannot hold a namespace (not supported)");
  }
  if (value.depth() >= kNamespaceDepth) {
    return absl::ResourceExhaustedError("chat template: value nested too deeply");
  }
  ns->Set(target.attribute, std::move(value));
  return absl::OkStatus();
}

absl::StatusOr<Interpreter::Flow> Interpreter::ExecFor(const Stmt& stmt, const ScopePtr& scope) {
  ASSIGN_OR_RETURN(Value iterable, Eval(*stmt.expr, scope));
  ASSIGN_OR_RETURN(ValueList items, Iterate(iterable));
  if (stmt.condition) {
    // jinja2 filters before looping, so loop.length and loop.last count only the kept items.
    ValueList kept;
    for (Value& item : items) {
      RETURN_IF_ERROR(CountIteration(stmt.line));
      auto probe = std::make_shared<Scope>(scope);
      RETURN_IF_ERROR(BindTarget(stmt.target, item, probe.get(), stmt.line));
      ASSIGN_OR_RETURN(Value keep, Eval(*stmt.condition, probe));
      if (keep.Truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    ASSIGN_OR_RETURN(Flow flow, ExecBody(stmt.else_body, scope));
    (void)flow;
    return Flow::kNormal;
  }
  const int64_t length = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < length; ++i) {
    RETURN_IF_ERROR(CountIteration(stmt.line));
    auto iteration = std::make_shared<Scope>(scope);
    RETURN_IF_ERROR(BindTarget(stmt.target, items[i], iteration.get(), stmt.line));
    ValueDict loop = {
        {Value::String("index"), Value::Int(i + 1)},
        {Value::String("index0"), Value::Int(i)},
        {Value::String("revindex"), Value::Int(length - i)},
        {Value::String("revindex0"), Value::Int(length - i - 1)},
        {Value::String("first"), Value::Bool(i == 0)},
        {Value::String("last"), Value::Bool(i == length - 1)},
        {Value::String("length"), Value::Int(length)},
        {Value::String("depth"), Value::Int(1)},
        {Value::String("depth0"), Value::Int(0)},
        {Value::String("previtem"), i > 0 ? items[i - 1] : Value::Undefined("there is no previous item")},
        {Value::String("nextitem"), i + 1 < length ? items[i + 1] : Value::Undefined("there is no next item")},
        {Value::String("cycle"),
         Value::Function("loop.cycle", [i](const CallArgs& args) -> absl::StatusOr<Value> {
           if (args.positional.empty()) return absl::InvalidArgumentError("no items for cycling given");
           return args.positional[i % args.positional.size()];
         })},
    };
    iteration->Set("loop", Value::Dict(std::move(loop)));
    ASSIGN_OR_RETURN(Flow flow, ExecBody(stmt.body, iteration));
    if (flow == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

Value Interpreter::MakeMacro(const Stmt& stmt, const ScopePtr& scope) {
  // The macro holds its defining scope weakly: that scope holds the macro, and a strong reference
  // would make a cycle that is never freed.
  std::weak_ptr<Scope> weak_scope = scope;
  const Stmt* macro = &stmt;
  return Value::Function(
      absl::StrCat("macro '", stmt.name, "'"),
      [this, macro, weak_scope](const CallArgs& args) -> absl::StatusOr<Value> {
        ScopePtr defining = weak_scope.lock();
        if (defining == nullptr) {
          return absl::InvalidArgumentError(
              absl::StrCat("macro '", macro->name, "' called after its scope ended"));
        }
        RETURN_IF_ERROR(CountIteration(macro->line));
        if (call_depth_ >= limits_.max_call_depth) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "chat template line ", macro->line, ": macro calls nested deeper than ",
              limits_.max_call_depth));
        }
        if (args.positional.size() > macro->params.size()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "macro '", macro->name, "' takes not more than ", macro->params.size(),
              " argument(s)"));
        }
        auto frame = std::make_shared<Scope>(defining);
        for (const auto& [key, value] : args.keyword) {
          bool known = false;
          for (const MacroParam& p : macro->params) known |= p.name == key;
          if (!known) {
            return absl::InvalidArgumentError(
                absl::StrCat("macro '", macro->name, "' takes no keyword argument '", key, "'"));
          }
        }
        ++call_depth_;
        absl::Status status;
        for (size_t i = 0; i < macro->params.size() && status.ok(); ++i) {
          const MacroParam& p = macro->params[i];
          Value v;  // a missing argument without default is Undefined, as in jinja2
          bool given = false;
          if (i < args.positional.size()) {
            v = args.positional[i];
            given = true;
          }
          for (const auto& [key, value] : args.keyword) {
            if (key == p.name) {
              v = value;
              given = true;
            }
          }
          if (!given && p.default_value) {
            absl::StatusOr<Value> d = Eval(*p.default_value, frame);
            if (!d.ok()) {
              status = d.status();
              break;
            }
            v = *std::move(d);
          }
          if (!given && !p.default_value) {
            v = Value::Undefined(absl::StrCat("parameter '", p.name, "' was not provided"));
          }
          frame->Set(p.name, std::move(v));
        }
        absl::StatusOr<std::string> text =
            status.ok() ? Capture(macro->body, frame) : absl::StatusOr<std::string>(status);
        --call_depth_;
        if (!text.ok()) return text.status();
        return Value::String(*std::move(text));
      });
}

}  // namespace baton::runtime::jinja
