// Expressions: names, literals, operators, attribute access, calls, filters and tests.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "runtime/tokenizer/jinja/access.h"
#include "runtime/tokenizer/jinja/filters.h"
#include "runtime/tokenizer/jinja/interpreter.h"
#include "runtime/tokenizer/jinja/tests.h"

namespace baton::runtime::jinja {

absl::StatusOr<Value> Interpreter::Eval(const Expr& expr, const ScopePtr& scope) {
  // Expressions are as deep as the parser allowed, but macros recurse through here too.
  if (++eval_depth_ > 4 * kMaxValueDepth + limits_.max_call_depth * 8) {
    --eval_depth_;
    return absl::ResourceExhaustedError("chat template: evaluation nested too deeply");
  }
  absl::StatusOr<Value> v = EvalInner(expr, scope);
  --eval_depth_;
  if (!v.ok()) return WithLine(v.status(), expr.line);
  return v;
}

absl::StatusOr<Value> Interpreter::CheckDepth(Value value, int line) const {
  if (value.depth() > kMaxValueDepth) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "chat template line ", line, ": value nested deeper than ", kMaxValueDepth));
  }
  return value;
}

absl::StatusOr<CallArgs> Interpreter::EvalArgs(const Expr& expr, size_t first_arg,
                                               const ScopePtr& scope) {
  CallArgs args;
  for (size_t i = first_arg; i < expr.args.size(); ++i) {
    ASSIGN_OR_RETURN(Value v, Eval(*expr.args[i], scope));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [key, value_expr] : expr.kwargs) {
    ASSIGN_OR_RETURN(Value v, Eval(*value_expr, scope));
    args.keyword.emplace_back(key, std::move(v));
  }
  return args;
}

absl::StatusOr<Value> Interpreter::EvalInner(const Expr& expr, const ScopePtr& scope) {
  switch (expr.kind) {
    case Expr::Kind::kLiteral:
      return expr.value;
    case Expr::Kind::kName: {
      if (const Value* v = scope->Lookup(expr.name)) return *v;
      return Value::Undefined(absl::StrCat("'", expr.name, "' is undefined"));
    }
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      ValueList items;
      for (const auto& e : expr.args) {
        ASSIGN_OR_RETURN(Value v, Eval(*e, scope));
        items.push_back(std::move(v));
      }
      return CheckDepth(Value::List(std::move(items), expr.kind == Expr::Kind::kTuple), expr.line);
    }
    case Expr::Kind::kDict: {
      ValueDict items;
      for (size_t i = 0; i + 1 < expr.args.size(); i += 2) {
        ASSIGN_OR_RETURN(Value key, Eval(*expr.args[i], scope));
        ASSIGN_OR_RETURN(Value value, Eval(*expr.args[i + 1], scope));
        if (key.is_list() && !key.is_tuple()) return absl::InvalidArgumentError("unhashable type: 'list'");
        if (key.is_dict()) return absl::InvalidArgumentError("unhashable type: 'dict'");
        bool replaced = false;
        for (auto& [k, v] : items) {
          if (Equals(k, key)) {
            v = value;
            replaced = true;
          }
        }
        if (!replaced) items.emplace_back(std::move(key), std::move(value));
      }
      return CheckDepth(Value::Dict(std::move(items)), expr.line);
    }
    case Expr::Kind::kGetAttr: {
      ASSIGN_OR_RETURN(Value object, Eval(*expr.args[0], scope));
      return GetAttr(object, expr.name);
    }
    case Expr::Kind::kGetItem: {
      ASSIGN_OR_RETURN(Value object, Eval(*expr.args[0], scope));
      ASSIGN_OR_RETURN(Value key, Eval(*expr.args[1], scope));
      return GetItem(object, key);
    }
    case Expr::Kind::kSlice: {
      ASSIGN_OR_RETURN(Value object, Eval(*expr.args[0], scope));
      Value bounds[3];
      for (int i = 0; i < 3; ++i) {
        if (expr.args[i + 1]) {
          ASSIGN_OR_RETURN(bounds[i], Eval(*expr.args[i + 1], scope));
        }
      }
      return GetSlice(object, bounds[0], bounds[1], bounds[2]);
    }
    case Expr::Kind::kUnary: {
      ASSIGN_OR_RETURN(Value operand, Eval(*expr.args[0], scope));
      if (expr.name == "not") return Value::Bool(!operand.Truthy());
      return UnaryOp(expr.name, operand);
    }
    case Expr::Kind::kBinary: {
      ASSIGN_OR_RETURN(Value left, Eval(*expr.args[0], scope));
      // and/or return an operand, as in Python, and short-circuit.
      if (expr.name == "and") return left.Truthy() ? Eval(*expr.args[1], scope) : left;
      if (expr.name == "or") return left.Truthy() ? left : Eval(*expr.args[1], scope);
      ASSIGN_OR_RETURN(Value right, Eval(*expr.args[1], scope));
      return BinaryOp(expr.name, left, right, size_limits_);
    }
    case Expr::Kind::kCompare: {
      ASSIGN_OR_RETURN(Value left, Eval(*expr.args[0], scope));
      for (size_t i = 0; i < expr.ops.size(); ++i) {
        ASSIGN_OR_RETURN(Value right, Eval(*expr.args[i + 1], scope));
        ASSIGN_OR_RETURN(bool holds, CompareOp(expr.ops[i], left, right));
        if (!holds) return Value::Bool(false);
        left = std::move(right);
      }
      return Value::Bool(true);
    }
    case Expr::Kind::kConditional: {
      ASSIGN_OR_RETURN(Value cond, Eval(*expr.args[0], scope));
      if (cond.Truthy()) return Eval(*expr.args[1], scope);
      if (expr.args[2]) return Eval(*expr.args[2], scope);
      return Value::Undefined("the inline if expression evaluated to false and no else section was defined");
    }
    case Expr::Kind::kCall: {
      ASSIGN_OR_RETURN(Value callee, Eval(*expr.args[0], scope));
      if (callee.is_undefined()) return UndefinedError(callee);
      if (!callee.is_callable()) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", callee.TypeName(), "' object is not callable"));
      }
      ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr, 1, scope));
      ASSIGN_OR_RETURN(Value result, callee.as_callable().fn(args));
      return CheckDepth(std::move(result), expr.line);
    }
    case Expr::Kind::kFilter: {
      ASSIGN_OR_RETURN(Value input, Eval(*expr.args[0], scope));
      ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr, 1, scope));
      ASSIGN_OR_RETURN(Value result, ApplyFilter(expr.name, input, args, size_limits_));
      return CheckDepth(std::move(result), expr.line);
    }
    case Expr::Kind::kTest: {
      ASSIGN_OR_RETURN(Value input, Eval(*expr.args[0], scope));
      ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr, 1, scope));
      ASSIGN_OR_RETURN(bool passed, ApplyTest(expr.name, input, args));
      return Value::Bool(passed != expr.negated);
    }
  }
  return absl::InternalError("unknown expression kind");
}

}  // namespace baton::runtime::jinja
