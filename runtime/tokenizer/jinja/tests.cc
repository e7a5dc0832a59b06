#include "runtime/tokenizer/jinja/tests.h"

#include <algorithm>
#include <cctype>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "runtime/tokenizer/absl_compat.h"
#include "runtime/tokenizer/jinja/operators.h"

namespace baton::runtime::jinja {
namespace {

constexpr std::string_view kTests[] = {
    "defined", "undefined", "none", "boolean", "false", "true", "integer", "float", "number",
    "string", "mapping", "iterable", "sequence", "callable", "sameas", "escaped", "even", "odd",
    "divisibleby", "eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt",
    "greaterthan", ">", "ge", ">=", "in", "lower", "upper"};

absl::StatusOr<Value> OneArg(std::string_view name, const CallArgs& args) {
  ASSIGN_OR_RETURN(std::vector<Value> a, BindArgs(name, args, {{"other", std::nullopt}}));
  return a[0];
}

}  // namespace

bool IsKnownTest(std::string_view name) {
  return std::find(std::begin(kTests), std::end(kTests), name) != std::end(kTests);
}

absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& v, const CallArgs& args) {
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict() && !v.is_namespace();
  // Python: anything iter() accepts (jinja2's Undefined iterates as empty).
  if (name == "iterable") {
    return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.is_namespace());
  }
  // jinja2's test: has len() and __getitem__, so dicts count and generators do not.
  if (name == "sequence") {
    return v.is_string() || (v.is_list() && !v.is_generator()) ||
           (v.is_dict() && !v.is_namespace());
  }
  if (name == "callable") return v.is_callable();
  if (name == "escaped") return false;
  if (name == "lower" || name == "upper") {
    std::string s = v.Str();
    bool cased = false;
    for (unsigned char c : s) {
      if (!std::isalpha(c)) continue;
      cased = true;
      if ((name == "lower") != (std::islower(c) != 0)) return false;
    }
    return cased;
  }
  if (name == "even" || name == "odd" || name == "divisibleby") {
    Value divisor = Value::Int(2);
    if (name == "divisibleby") {
      ASSIGN_OR_RETURN(divisor, OneArg(name, args));
    }
    SizeLimits no_growth{0, 0};
    ASSIGN_OR_RETURN(Value rem, BinaryOp("%", v, divisor, no_growth));
    bool zero = !rem.Truthy();
    return name == "odd" ? !zero : zero;
  }
  if (name == "sameas") {
    ASSIGN_OR_RETURN(Value other, OneArg(name, args));
    // Identity: singletons compare by value, containers by their shared storage.
    if (v.kind() != other.kind()) return false;
    if (v.is_list()) return &v.as_list() == &other.as_list();
    if (v.is_dict()) return &v.as_dict() == &other.as_dict();
    return Equals(v, other);
  }
  if (name == "in") {
    ASSIGN_OR_RETURN(Value other, OneArg(name, args));
    return Contains(other, v);
  }
  struct Alias {
    std::string_view test, op;
  };
  static constexpr Alias kComparisons[] = {
      {"eq", "=="}, {"equalto", "=="}, {"==", "=="}, {"ne", "!="}, {"!=", "!="},
      {"lt", "<"},  {"lessthan", "<"}, {"<", "<"},   {"le", "<="}, {"<=", "<="},
      {"gt", ">"},  {"greaterthan", ">"}, {">", ">"}, {"ge", ">="}, {">=", ">="}};
  for (const Alias& alias : kComparisons) {
    if (name == alias.test) {
      ASSIGN_OR_RETURN(Value other, OneArg(name, args));
      return CompareOp(alias.op, v, other);
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("no test named '", ToAbsl(name), "'"));
}

}  // namespace baton::runtime::jinja
