#include "runtime/tokenizer/jinja/operators.h"

#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "runtime/tokenizer/absl_compat.h"
#include "runtime/tokenizer/jinja/access.h"

namespace baton::runtime::jinja {
namespace {

absl::Status TypeError(std::string_view op, const Value& a, const Value& b) {
  return absl::InvalidArgumentError(absl::StrCat("unsupported operand type(s) for ", ToAbsl(op),
                                                 ": '", a.TypeName(), "' and '", b.TypeName(),
                                                 "'"));
}

absl::Status TooBig(std::string_view what) {
  return absl::ResourceExhaustedError(
      absl::StrCat("chat template: ", ToAbsl(what), " exceeds the render size limit"));
}

absl::StatusOr<Value> IntResult(__int128 r) {
  if (r > std::numeric_limits<int64_t>::max() || r < std::numeric_limits<int64_t>::min()) {
    return absl::InvalidArgumentError("integer overflow (beyond 64 bits)");
  }
  return Value::Int(static_cast<int64_t>(r));
}

double PyFloorMod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

absl::StatusOr<Value> Repeat(const Value& seq, int64_t n, const SizeLimits& limits) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty() && static_cast<uint64_t>(n) > limits.max_bytes / s.size()) {
      return TooBig("a repeated string");
    }
    std::string out;
    out.reserve(s.size() * n);
    for (int64_t i = 0; i < n; ++i) out += s;
    return Value::String(std::move(out));
  }
  const ValueList& items = seq.as_list();
  if (!items.empty() && static_cast<uint64_t>(n) > limits.max_items / items.size()) {
    return TooBig("a repeated list");
  }
  ValueList out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::List(std::move(out), seq.is_tuple());
}

}  // namespace

absl::StatusOr<Value> BinaryOp(std::string_view op, const Value& a, const Value& b,
                               const SizeLimits& limits) {
  if (op == "~") {
    // jinja2 converts both sides with str(); Undefined is "".
    std::string out = a.Str();
    std::string rhs = b.Str();
    if (out.size() + rhs.size() > limits.max_bytes) return TooBig("a concatenated string");
    return Value::String(out + rhs);
  }
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (a.is_number() && b.is_number()) {
    bool use_float = a.is_float() || b.is_float();
    if (op == "/") {
      if (b.as_float() == 0) return absl::InvalidArgumentError("division by zero");
      return Value::Float(a.as_float() / b.as_float());
    }
    if (use_float) {
      double x = a.as_float(), y = b.as_float();
      if (op == "+") return Value::Float(x + y);
      if (op == "-") return Value::Float(x - y);
      if (op == "*") return Value::Float(x * y);
      if (op == "**") return Value::Float(std::pow(x, y));
      if (y == 0) return absl::InvalidArgumentError("float division by zero");
      if (op == "//") return Value::Float(std::floor(x / y));
      if (op == "%") return Value::Float(PyFloorMod(x, y));
    } else {
      __int128 x = a.as_int(), y = b.as_int();
      if (op == "+") return IntResult(x + y);
      if (op == "-") return IntResult(x - y);
      if (op == "*") return IntResult(x * y);
      if (op == "**") {
        if (y < 0) return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
        __int128 r = 1;
        for (__int128 i = 0; i < y; ++i) {
          r *= x;
          if (r > std::numeric_limits<int64_t>::max() || r < std::numeric_limits<int64_t>::min()) {
            return absl::InvalidArgumentError("integer overflow (beyond 64 bits)");
          }
          if (r == 0 || r == 1) break;
        }
        return IntResult(r);
      }
      if (y == 0) return absl::InvalidArgumentError("integer division or modulo by zero");
      __int128 q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;  // floor, as Python
      if (op == "//") return IntResult(q);
      if (op == "%") return IntResult(x - q * y);
    }
    return TypeError(op, a, b);
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      if (a.as_string().size() + b.as_string().size() > limits.max_bytes) {
        return TooBig("a concatenated string");
      }
      return Value::String(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && !a.is_generator() && !b.is_generator() &&
        a.is_tuple() == b.is_tuple()) {
      if (a.as_list().size() + b.as_list().size() > limits.max_items) {
        return TooBig("a concatenated list");
      }
      ValueList out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return Value::List(std::move(out), a.is_tuple());
    }
  }
  if (op == "*") {
    bool a_seq = a.is_string() || (a.is_list() && !a.is_generator());
    bool b_seq = b.is_string() || (b.is_list() && !b.is_generator());
    if (a_seq && (b.is_int() || b.is_bool())) return Repeat(a, b.as_int(), limits);
    if (b_seq && (a.is_int() || a.is_bool())) return Repeat(b, a.as_int(), limits);
  }
  return TypeError(op, a, b);
}

absl::StatusOr<Value> UnaryOp(std::string_view op, const Value& a) {
  if (a.is_undefined()) return UndefinedError(a);
  if (!a.is_number()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad operand type for unary ", ToAbsl(op), ": '", a.TypeName(), "'"));
  }
  if (op == "+") return a.is_float() ? a : Value::Int(a.as_int());
  if (a.is_float()) return Value::Float(-a.as_float());
  return IntResult(-static_cast<__int128>(a.as_int()));
}

absl::StatusOr<bool> Contains(const Value& haystack, const Value& needle) {
  if (haystack.is_string()) {
    if (!needle.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'in <string>' requires string as left operand, not ", needle.TypeName()));
    }
    return haystack.as_string().find(needle.as_string()) != std::string::npos;
  }
  if (haystack.is_dict() && !haystack.is_namespace()) {
    for (const auto& [k, v] : haystack.as_dict()) {
      if (Equals(k, needle)) return true;
    }
    return false;
  }
  if (haystack.is_list()) {
    for (const Value& item : haystack.as_list()) {
      if (Equals(item, needle)) return true;
    }
    return false;
  }
  if (haystack.is_undefined()) return false;  // Undefined iterates as empty
  return absl::InvalidArgumentError(
      absl::StrCat("argument of type '", haystack.TypeName(), "' is not iterable"));
}

absl::StatusOr<bool> CompareOp(std::string_view op, const Value& a, const Value& b) {
  if (op == "==") return Equals(a, b);
  if (op == "!=") return !Equals(a, b);
  if (op == "in") return Contains(b, a);
  if (op == "not in") {
    ASSIGN_OR_RETURN(bool in, Contains(b, a));
    return !in;
  }
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (op == "<") return LessThan(a, b);
  if (op == ">") return LessThan(b, a);
  if (op == "<=") {
    ASSIGN_OR_RETURN(bool greater, LessThan(b, a));
    return !greater;
  }
  if (op == ">=") {
    ASSIGN_OR_RETURN(bool less, LessThan(a, b));
    return !less;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown comparison '", ToAbsl(op), "'"));
}

}  // namespace baton::runtime::jinja
