#include "runtime/tokenizer/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace baton::runtime::jinja {

Value Value::Undefined(std::string hint) {
  Value v;
  v.string_ = std::make_shared<std::string>(std::move(hint));
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.bool_ = b;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.int_ = i;
  return v;
}

Value Value::Float(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.float_ = f;
  return v;
}

Value Value::String(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.string_ = std::make_shared<std::string>(std::move(s));
  return v;
}

Value Value::List(ValueList items, bool is_tuple) {
  return Sequence(std::move(items), is_tuple ? Seq::kTuple : Seq::kList);
}

Value Value::Sequence(ValueList items, Seq seq) {
  Value v;
  v.kind_ = Kind::kList;
  v.is_tuple_ = seq == Seq::kTuple;
  v.is_generator_ = seq == Seq::kGenerator;
  for (const Value& item : items) {
    v.depth_ = std::max(v.depth_, item.depth_ + 1);
    v.contains_namespace_ |= item.contains_namespace_;
  }
  if (items.empty()) v.depth_ = 1;
  v.list_ = std::make_shared<ValueList>(std::move(items));
  return v;
}

Value Value::Dict(ValueDict items, bool is_namespace) {
  Value v;
  v.kind_ = Kind::kDict;
  v.is_namespace_ = is_namespace;
  v.depth_ = 1;
  for (const auto& [key, item] : items) {
    v.depth_ = std::max(v.depth_, item.depth_ + 1);
    v.contains_namespace_ |= item.contains_namespace_;
  }
  if (is_namespace) {
    v.depth_ = kNamespaceDepth;
    v.contains_namespace_ = true;
  }
  v.dict_ = std::make_shared<ValueDict>(std::move(items));
  return v;
}

Value Value::Function(std::string name, NativeFunction fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.callable_ = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return bool_;
    case Kind::kInt:
      return int_ != 0;
    case Kind::kFloat:
      return float_ != 0;
    case Kind::kString:
      return !string_->empty();
    case Kind::kList:
      return is_generator_ || !list_->empty();
    case Kind::kDict:
      // A jinja2 Namespace is a plain object, always true.
      return is_namespace_ || !dict_->empty();
    case Kind::kCallable:
      return true;
  }
  return false;
}

const Value* Value::Find(std::string_view key) const {
  if (!is_dict()) return nullptr;
  for (const auto& [k, v] : *dict_) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

void Value::Set(std::string_view key, Value value) const {
  for (auto& [k, v] : *dict_) {
    if (k.is_string() && k.as_string() == key) {
      v = std::move(value);
      return;
    }
  }
  dict_->emplace_back(Value::String(std::string(key)), std::move(value));
}

std::string FormatPythonFloat(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  // Shortest round-trip digits in scientific form ("1.2345e+17"), re-laid out the way Python's
  // float_repr_style 'short' does: positional for exponents in [-4, 16), scientific otherwise.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  std::string sci(buf, end);
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t e_pos = sci.find('e');
  std::string mantissa = sci.substr(0, e_pos);
  int exponent = std::atoi(sci.c_str() + e_pos + 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out.append("0.");
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out.append(digits);
    } else if (static_cast<int>(digits.size()) <= exponent + 1) {
      out += digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
    } else {
      out.append(digits, 0, exponent + 1);
      out.push_back('.');
      out.append(digits, exponent + 1, std::string::npos);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) {
    out.push_back('.');
    out.append(digits, 1, std::string::npos);
  }
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp_buf;
}

std::string PythonStringRepr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<unsigned char>(quote)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

std::string Value::Str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return *string_;
    default:
      return Repr();
  }
}

std::string Value::Repr() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return bool_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(int_);
    case Kind::kFloat:
      return FormatPythonFloat(float_);
    case Kind::kString:
      return PythonStringRepr(*string_);
    case Kind::kList: {
      if (is_generator_) return "<generator object>";
      std::string out = is_tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i > 0) out += ", ";
        out += (*list_)[i].Repr();
      }
      if (is_tuple_ && list_->size() == 1) out += ",";
      return out + (is_tuple_ ? ")" : "]");
    }
    case Kind::kDict: {
      std::string out = is_namespace_ ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : *dict_) {
        if (!first) out += ", ";
        first = false;
        out += k.Repr() + ": " + v.Repr();
      }
      return out + (is_namespace_ ? "}>" : "}");
    }
    case Kind::kCallable:
      return "<function " + callable_->name + ">";
  }
  return "";
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return is_tuple_ ? "tuple" : "list";
    case Kind::kDict:
      return is_namespace_ ? "Namespace" : "dict";
    case Kind::kCallable:
      return "function";
  }
  return "object";
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      // Python: a list never equals a tuple.
      if (a.is_tuple() != b.is_tuple()) return false;
      const ValueList& x = a.as_list();
      const ValueList& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!Equals(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      if (a.is_namespace() || b.is_namespace()) return &a.as_dict() == &b.as_dict();
      const ValueDict& x = a.as_dict();
      const ValueDict& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x) {
        bool found = false;
        for (const auto& [k2, v2] : y) {
          if (Equals(k, k2)) {
            if (!Equals(v, v2)) return false;
            found = true;
            break;
          }
        }
        if (!found) return false;
      }
      return true;
    }
    case Value::Kind::kCallable:
      return &a.as_callable() == &b.as_callable();
    default:
      return false;
  }
}

absl::StatusOr<bool> LessThan(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) {
    // UTF-8 byte order is code point order.
    return a.as_string() < b.as_string();
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const ValueList& x = a.as_list();
    const ValueList& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equals(x[i], y[i])) continue;
      return LessThan(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return absl::InvalidArgumentError(absl::StrCat("'<' not supported between instances of '",
                                                 a.TypeName(), "' and '", b.TypeName(), "'"));
}

}  // namespace baton::runtime::jinja
