#include "runtime/tokenizer/jinja/access.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "runtime/tokenizer/absl_compat.h"
#include "runtime/tokenizer/jinja/call_args.h"
#include "runtime/tokenizer/jinja/py_string.h"

namespace baton::runtime::jinja {
namespace {

Value Missing(const Value& object, std::string_view name) {
  return Value::Undefined(
      absl::StrCat("'", object.TypeName(), " object' has no attribute '", ToAbsl(name), "'"));
}

std::optional<std::string> OptionalString(const Value& v) {
  if (v.is_none() || v.is_undefined()) return std::nullopt;
  return v.Str();
}

Value StringList(const std::vector<std::string>& parts) {
  ValueList items;
  for (const auto& p : parts) items.push_back(Value::String(p));
  return Value::List(std::move(items));
}

// Binds `name` of the str `self` as a callable, or returns nullopt for names str lacks.
std::optional<Value> StringMethod(const std::string& self, std::string_view name) {
  auto method = [&](std::vector<Param> params,
                    std::function<absl::StatusOr<Value>(const std::vector<Value>&)> body) {
    std::string full = absl::StrCat("str.", ToAbsl(name));
    return Value::Function(full, [self, full, params = std::move(params),
                                  body = std::move(body)](const CallArgs& args)
                                     -> absl::StatusOr<Value> {
      ASSIGN_OR_RETURN(std::vector<Value> bound, BindArgs(full, args, params));
      return body(bound);
    });
  };
  const Value none = Value::None();
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    bool left = name != "rstrip", right = name != "lstrip";
    return method({{"chars", none}}, [self, left, right](const std::vector<Value>& a) {
      return Value::String(PyStrip(self, OptionalString(a[0]), left, right));
    });
  }
  if (name == "split" || name == "rsplit") {
    bool reverse = name == "rsplit";
    return method({{"sep", none}, {"maxsplit", Value::Int(-1)}},
                  [self, reverse](const std::vector<Value>& a) -> absl::StatusOr<Value> {
                    std::optional<std::string> sep = OptionalString(a[0]);
                    if (sep && sep->empty()) return absl::InvalidArgumentError("empty separator");
                    int64_t maxsplit = a[1].as_int();
                    return StringList(reverse ? PyRSplit(self, sep, maxsplit)
                                              : PySplit(self, sep, maxsplit));
                  });
  }
  if (name == "splitlines") {
    return method({}, [self](const std::vector<Value>&) {
      std::vector<std::string> lines = PySplit(self, std::string("\n"), -1);
      if (!lines.empty() && lines.back().empty()) lines.pop_back();
      for (auto& line : lines) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
      }
      return StringList(lines);
    });
  }
  if (name == "startswith" || name == "endswith") {
    bool starts = name == "startswith";
    return method({{"prefix", std::nullopt}}, [self, starts](const std::vector<Value>& a)
                                                  -> absl::StatusOr<Value> {
      ValueList candidates = a[0].is_tuple() ? a[0].as_list() : ValueList{a[0]};
      for (const Value& c : candidates) {
        if (!c.is_string()) {
          return absl::InvalidArgumentError("startswith/endswith takes a str or a tuple of str");
        }
        std::string_view p = c.as_string();
        bool hit = starts ? std::string_view(self).substr(0, p.size()) == p
                          : (self.size() >= p.size() &&
                             std::string_view(self).substr(self.size() - p.size()) == p);
        if (hit) return Value::Bool(true);
      }
      return Value::Bool(false);
    });
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    std::string n(name);
    return method({}, [self, n](const std::vector<Value>&) {
      if (n == "upper") return Value::String(PyUpper(self));
      if (n == "lower") return Value::String(PyLower(self));
      if (n == "title") return Value::String(PyTitle(self));
      return Value::String(PyCapitalize(self));
    });
  }
  if (name == "replace") {
    return method({{"old", std::nullopt}, {"new", std::nullopt}, {"count", Value::Int(-1)}},
                  [self](const std::vector<Value>& a) {
                    return Value::String(
                        PyReplace(self, a[0].Str(), a[1].Str(), a[2].as_int()));
                  });
  }
  if (name == "find" || name == "rfind" || name == "count" || name == "index") {
    std::string n(name);
    return method({{"sub", std::nullopt}}, [self, n](const std::vector<Value>& a)
                                               -> absl::StatusOr<Value> {
      std::string sub = a[0].Str();
      if (n == "count") {
        if (sub.empty()) return Value::Int(static_cast<int64_t>(PyLength(self) + 1));
        int64_t num = 0;
        for (size_t p = self.find(sub); p != std::string::npos; p = self.find(sub, p + sub.size())) {
          ++num;
        }
        return Value::Int(num);
      }
      size_t p = n == "rfind" ? self.rfind(sub) : self.find(sub);
      if (p == std::string::npos) {
        if (n == "index") return absl::InvalidArgumentError("substring not found");
        return Value::Int(-1);
      }
      return Value::Int(static_cast<int64_t>(PyLength(std::string_view(self).substr(0, p))));
    });
  }
  if (name == "join") {
    return method({{"iterable", std::nullopt}}, [self](const std::vector<Value>& a)
                                                    -> absl::StatusOr<Value> {
      ASSIGN_OR_RETURN(ValueList items, Iterate(a[0]));
      std::string out;
      for (size_t i = 0; i < items.size(); ++i) {
        if (!items[i].is_string()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "sequence item ", i, ": expected str instance, ", items[i].TypeName(), " found"));
        }
        if (i > 0) out += self;
        out += items[i].as_string();
      }
      return Value::String(std::move(out));
    });
  }
  if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum" ||
      name == "islower" || name == "isupper") {
    std::string n(name);
    return method({}, [self, n](const std::vector<Value>&) {
      if (self.empty()) return Value::Bool(false);
      if (n == "islower" || n == "isupper") {
        bool cased = false;
        for (unsigned char c : self) {
          if (std::isalpha(c)) {
            cased = true;
            if ((n == "islower") != (std::islower(c) != 0)) return Value::Bool(false);
          }
        }
        return Value::Bool(cased);
      }
      for (char32_t c : DecodeUtf8(self)) {
        bool ok = n == "isspace"   ? IsPyWhitespace(c)
                  : n == "isdigit" ? (c >= '0' && c <= '9')
                  : n == "isalpha" ? (c < 0x80 && std::isalpha(static_cast<int>(c)))
                                   : (c < 0x80 && std::isalnum(static_cast<int>(c)));
        if (!ok) return Value::Bool(false);
      }
      return Value::Bool(true);
    });
  }
  return std::nullopt;
}

std::optional<Value> DictMethod(const Value& self, std::string_view name) {
  if (name == "items" || name == "keys" || name == "values") {
    std::string n(name);
    return Value::Function("dict." + n, [self, n](const CallArgs& args) -> absl::StatusOr<Value> {
      RETURN_IF_ERROR(BindArgs("dict." + n, args, {}).status());
      ValueList out;
      for (const auto& [k, v] : self.as_dict()) {
        if (n == "items") {
          out.push_back(Value::List({k, v}, /*is_tuple=*/true));
        } else {
          out.push_back(n == "keys" ? k : v);
        }
      }
      return Value::List(std::move(out));
    });
  }
  if (name == "get") {
    return Value::Function("dict.get", [self](const CallArgs& args) -> absl::StatusOr<Value> {
      ASSIGN_OR_RETURN(std::vector<Value> a,
                       BindArgs("dict.get", args, {{"key", std::nullopt}, {"default", Value::None()}}));
      for (const auto& [k, v] : self.as_dict()) {
        if (Equals(k, a[0])) return v;
      }
      return a[1];
    });
  }
  return std::nullopt;
}

std::optional<Value> ListMethod(const Value& self, std::string_view name) {
  if (name == "index" || name == "count") {
    std::string n(name);
    return Value::Function("list." + n, [self, n](const CallArgs& args) -> absl::StatusOr<Value> {
      ASSIGN_OR_RETURN(std::vector<Value> a, BindArgs("list." + n, args, {{"value", std::nullopt}}));
      int64_t count = 0;
      const ValueList& items = self.as_list();
      for (size_t i = 0; i < items.size(); ++i) {
        if (!Equals(items[i], a[0])) continue;
        if (n == "index") return Value::Int(static_cast<int64_t>(i));
        ++count;
      }
      if (n == "index") return absl::InvalidArgumentError("list.index(x): x not in list");
      return Value::Int(count);
    });
  }
  return std::nullopt;
}

bool IsMutatingMethod(const Value& object, std::string_view name) {
  static constexpr std::string_view kList[] = {"append", "extend", "insert", "pop", "remove",
                                               "clear", "sort", "reverse"};
  static constexpr std::string_view kDict[] = {"update", "pop", "popitem", "setdefault", "clear"};
  if (object.is_list() && !object.is_tuple()) {
    return std::find(std::begin(kList), std::end(kList), name) != std::end(kList);
  }
  if (object.is_dict() && !object.is_namespace()) {
    return std::find(std::begin(kDict), std::end(kDict), name) != std::end(kDict);
  }
  return false;
}

// Python's index normalization: -1 is the last item; nullopt when out of range.
std::optional<size_t> NormalizeIndex(int64_t index, size_t size) {
  if (index < 0) index += static_cast<int64_t>(size);
  if (index < 0 || index >= static_cast<int64_t>(size)) return std::nullopt;
  return static_cast<size_t>(index);
}

}  // namespace

absl::Status UndefinedError(const Value& undefined) {
  const std::string& hint = undefined.undefined_hint();
  return absl::InvalidArgumentError(hint.empty() ? std::string("value is undefined") : hint);
}

absl::StatusOr<Value> GetAttr(const Value& object, std::string_view name) {
  if (object.is_undefined()) return UndefinedError(object);
  if (object.is_string()) {
    if (auto m = StringMethod(object.as_string(), name)) return *m;
  } else if (object.is_namespace()) {
    if (const Value* v = object.Find(name)) return *v;
    return Missing(object, name);
  } else if (object.is_dict()) {
    if (auto m = DictMethod(object, name)) return *m;
  } else if (object.is_list() && !object.is_generator()) {
    if (auto m = ListMethod(object, name)) return *m;
  }
  if (IsMutatingMethod(object, name)) {
    return Value::Undefined(absl::StrCat("access to attribute '", ToAbsl(name), "' of '",
                                         object.TypeName(), "' object is unsafe."));
  }
  if (object.is_dict()) {
    if (const Value* v = object.Find(name)) return *v;
  }
  return Missing(object, name);
}

absl::StatusOr<Value> GetItem(const Value& object, const Value& key) {
  if (object.is_undefined()) return UndefinedError(object);
  if (object.is_dict() && !object.is_namespace()) {
    for (const auto& [k, v] : object.as_dict()) {
      if (Equals(k, key)) return v;
    }
  } else if (object.is_list() && !object.is_generator() && (key.is_int() || key.is_bool())) {
    if (auto i = NormalizeIndex(key.as_int(), object.as_list().size())) {
      return object.as_list()[*i];
    }
    return Value::Undefined(absl::StrCat("'", object.TypeName(), " object' has no element ",
                                         key.as_int()));
  } else if (object.is_string() && (key.is_int() || key.is_bool())) {
    std::u32string cps = DecodeUtf8(object.as_string());
    if (auto i = NormalizeIndex(key.as_int(), cps.size())) {
      return Value::String(EncodeUtf8(std::u32string_view(&cps[*i], 1)));
    }
    return Value::Undefined("string index out of range");
  }
  // jinja2 falls back to the attribute of that name: message['items'] is dict.items.
  if (key.is_string()) return GetAttr(object, key.as_string());
  return Value::Undefined(absl::StrCat("'", object.TypeName(), " object' has no element ",
                                       key.Repr()));
}

absl::StatusOr<Value> GetSlice(const Value& object, const Value& start, const Value& stop,
                               const Value& step) {
  if (object.is_undefined()) return UndefinedError(object);
  auto bound = [](const Value& v, int64_t fallback) -> absl::StatusOr<int64_t> {
    if (v.is_undefined() || v.is_none()) return fallback;
    if (!v.is_int() && !v.is_bool()) {
      return absl::InvalidArgumentError("slice indices must be integers or None");
    }
    return v.as_int();
  };
  ASSIGN_OR_RETURN(int64_t step_n, bound(step, 1));
  if (step_n == 0) return absl::InvalidArgumentError("slice step cannot be zero");
  bool is_string = object.is_string();
  if (!is_string && !(object.is_list() && !object.is_generator())) {
    return Value::Undefined(absl::StrCat("'", object.TypeName(), "' object is not subscriptable"));
  }
  std::u32string cps = is_string ? DecodeUtf8(object.as_string()) : std::u32string();
  int64_t size = static_cast<int64_t>(is_string ? cps.size() : object.as_list().size());
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](int64_t i, bool is_start) {
    (void)is_start;
    if (i < 0) {
      i += size;
      if (i < 0) i = step_n < 0 ? -1 : 0;
    } else if (i >= size) {
      i = step_n < 0 ? size - 1 : size;
    }
    return i;
  };
  ASSIGN_OR_RETURN(int64_t lo, bound(start, step_n < 0 ? size - 1 : 0));
  ASSIGN_OR_RETURN(int64_t hi, bound(stop, step_n < 0 ? -size - 1 : size));
  lo = adjust(lo, true);
  hi = adjust(hi, false);
  std::vector<int64_t> picks;
  for (int64_t i = lo; step_n > 0 ? i < hi : i > hi; i += step_n) picks.push_back(i);
  if (is_string) {
    std::u32string out;
    for (int64_t i : picks) out.push_back(cps[i]);
    return Value::String(EncodeUtf8(out));
  }
  ValueList out;
  for (int64_t i : picks) out.push_back(object.as_list()[i]);
  return Value::List(std::move(out), object.is_tuple());
}

absl::StatusOr<ValueList> Iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return ValueList{};
    case Value::Kind::kList:
      return value.as_list();
    case Value::Kind::kString: {
      ValueList out;
      for (char32_t c : DecodeUtf8(value.as_string())) {
        out.push_back(Value::String(EncodeUtf8(std::u32string_view(&c, 1))));
      }
      return out;
    }
    case Value::Kind::kDict:
      if (!value.is_namespace()) {
        ValueList out;
        for (const auto& [k, v] : value.as_dict()) out.push_back(k);
        return out;
      }
      break;
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", value.TypeName(), "' object is not iterable"));
}

}  // namespace baton::runtime::jinja
