// The values a chat template computes with, modelled on the Python objects Jinja2 hands to a template
// (None, bool, int, float, str, list, tuple, dict, callables, jinja2's Undefined and Namespace), so
// that printing, truthiness, equality and ordering come out byte-for-byte as in Python.
//
// Lists, dicts and namespaces are shared by reference like Python objects: copying a Value copies
// the handle. Templates cannot mutate lists or dicts (transformers renders in an
// ImmutableSandboxedEnvironment); only namespaces change, through `{% set ns.attr = ... %}`.
// Not thread-safe; a Value graph belongs to one render.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace baton::runtime::jinja {

class Value;
struct CallArgs;

using ValueList = std::vector<Value>;
// Insertion-ordered like a Python dict; lookups are linear, which is fine at chat-message sizes.
using ValueDict = std::vector<std::pair<Value, Value>>;
using NativeFunction = std::function<absl::StatusOr<Value>(const CallArgs&)>;

struct Callable {
  std::string name;  // for messages: "raise_exception", "macro 'render'", "str.strip"
  NativeFunction fn;
};

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

  Value() = default;  // Undefined
  static Value Undefined(std::string hint = "");
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double f);
  static Value String(std::string s);
  // A list, a tuple, or a one-pass generator (what jinja2's map/select/... return: always true,
  // no len(), prints as "<generator object>").
  enum class Seq { kList, kTuple, kGenerator };
  static Value List(ValueList items, bool is_tuple = false);
  static Value Sequence(ValueList items, Seq seq);
  static Value Dict(ValueDict items = {}, bool is_namespace = false);
  static Value Function(std::string name, NativeFunction fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || is_bool(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && is_tuple_; }
  bool is_generator() const { return kind_ == Kind::kList && is_generator_; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kDict && is_namespace_; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool as_bool() const { return bool_; }
  int64_t as_int() const { return is_bool() ? (bool_ ? 1 : 0) : int_; }
  double as_float() const { return is_float() ? float_ : static_cast<double>(as_int()); }
  const std::string& as_string() const { return *string_; }
  // Pre-condition: is_list(). The vector is shared with every copy of this Value.
  const ValueList& as_list() const { return *list_; }
  ValueList& mutable_list() const { return *list_; }
  // Pre-condition: is_dict().
  const ValueDict& as_dict() const { return *dict_; }
  ValueDict& mutable_dict() const { return *dict_; }
  const Callable& as_callable() const { return *callable_; }
  // Nesting of lists and dicts (a scalar is 0; a namespace counts as kNamespaceDepth), and whether
  // a namespace is inside: the interpreter bounds both so that no value is cyclic or deep enough to
  // overflow the stack when printed, compared or destroyed.
  int depth() const { return depth_; }
  bool contains_namespace() const { return contains_namespace_; }

  // What an Undefined stands for, for error messages: "'x' is undefined".
  const std::string& undefined_hint() const { return *string_; }

  // Python truthiness (Undefined is false).
  bool Truthy() const;
  // The member `key` of a dict, or nullptr.
  const Value* Find(std::string_view key) const;
  void Set(std::string_view key, Value value) const;

  // Python's str(): what `{{ value }}` prints. Undefined prints as "".
  std::string Str() const;
  // Python's repr(): how list and dict members print.
  std::string Repr() const;
  // "str", "int", "dict object"... as jinja2's messages name them.
  std::string TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool bool_ = false;
  bool is_tuple_ = false;
  bool is_namespace_ = false;
  bool is_generator_ = false;
  bool contains_namespace_ = false;
  int depth_ = 0;
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<std::string> string_;  // the string, or an Undefined's hint
  std::shared_ptr<ValueList> list_;
  std::shared_ptr<ValueDict> dict_;
  std::shared_ptr<Callable> callable_;
};

// Python ==, with 1 == 1.0 == True and element-wise list/dict equality. Undefined equals only
// Undefined, as jinja2's Undefined.__eq__ does.
inline constexpr int kMaxValueDepth = 128;
inline constexpr int kNamespaceDepth = 64;

bool Equals(const Value& a, const Value& b);

// Python's <, for numbers, strings (by code point) and lists; InvalidArgument otherwise, as Python
// raises TypeError for '<' between str and int.
absl::StatusOr<bool> LessThan(const Value& a, const Value& b);

// Python's repr of a float: the shortest string that round-trips ("0.1", "1e+20", "5.0").
std::string FormatPythonFloat(double f);
// Python's repr of a str: single quotes unless the text holds ' and no ".
std::string PythonStringRepr(std::string_view s);

}  // namespace baton::runtime::jinja
