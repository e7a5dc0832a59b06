#include "runtime/tokenizer/jinja/filters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "runtime/tokenizer/absl_compat.h"
#include "runtime/tokenizer/jinja/access.h"
#include "runtime/tokenizer/jinja/json_value.h"
#include "runtime/tokenizer/jinja/py_string.h"
#include "runtime/tokenizer/jinja/tests.h"

namespace baton::runtime::jinja {
namespace {

using Args = std::vector<Value>;
using Seq = Value::Seq;

constexpr std::string_view kFilters[] = {
    "abs", "attr", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
    "first", "float", "forceescape", "indent", "int", "items", "join", "last", "length", "list",
    "lower", "map", "max", "min", "reject", "rejectattr", "replace", "reverse", "round", "safe",
    "select", "selectattr", "sort", "string", "sum", "title", "tojson", "trim", "unique", "upper",
    "wordcount"};

absl::Status Invalid(std::string_view filter, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("filter '", ToAbsl(filter), "': ", ToAbsl(what)));
}

// jinja2's make_attrgetter: "a.b.0" looks up item by item (an integer part indexes).
absl::StatusOr<Value> LookupPath(const Value& item, const Value& path) {
  if (!path.is_string()) return GetItem(item, path);
  Value current = item;
  for (std::string_view part : PySplit(path.as_string(), std::string("."), -1)) {
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    Value key = numeric ? Value::Int(std::atoll(std::string(part).c_str()))
                        : Value::String(std::string(part));
    ASSIGN_OR_RETURN(current, GetItem(current, key));
  }
  return current;
}

// The sort key of jinja2's sort/unique/dictsort: strings compare lowercased unless case_sensitive.
Value SortKey(const Value& v, bool case_sensitive) {
  return (!case_sensitive && v.is_string()) ? Value::String(PyLower(v.as_string())) : v;
}

absl::Status SortValues(std::vector<std::pair<Value, Value>>* keyed, bool reverse) {
  absl::Status error;
  std::stable_sort(keyed->begin(), keyed->end(), [&](const auto& a, const auto& b) {
    absl::StatusOr<bool> less = reverse ? LessThan(b.first, a.first) : LessThan(a.first, b.first);
    if (!less.ok()) {
      error.Update(less.status());
      return false;
    }
    return *less;
  });
  return error;
}

// jinja2's title filter, which is not str.title(): it splits on runs of whitespace and "-({[<",
// then upper-cases the first character of every piece and lower-cases the rest ('{"temp"' stays).
std::string JinjaTitle(std::string_view s) {
  std::u32string cps = DecodeUtf8(s);
  auto is_separator = [](char32_t c) {
    return IsPyWhitespace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
  };
  std::string out;
  size_t i = 0;
  while (i < cps.size()) {
    size_t j = i + 1;
    bool separator = is_separator(cps[i]);
    while (j < cps.size() && is_separator(cps[j]) == separator) ++j;
    std::u32string_view piece = std::u32string_view(cps).substr(i, j - i);
    out += PyUpper(EncodeUtf8(piece.substr(0, 1)));
    out += PyLower(EncodeUtf8(piece.substr(1)));
    i = j;
  }
  return out;
}

std::string HtmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

absl::StatusOr<Value> Length(const Value& v) {
  if (v.is_string()) return Value::Int(static_cast<int64_t>(PyLength(v.as_string())));
  if (v.is_list() && !v.is_generator()) return Value::Int(static_cast<int64_t>(v.as_list().size()));
  if (v.is_dict() && !v.is_namespace()) return Value::Int(static_cast<int64_t>(v.as_dict().size()));
  if (v.is_undefined()) return Value::Int(0);
  return absl::InvalidArgumentError(
      absl::StrCat("object of type '", v.TypeName(), "' has no len()"));
}

absl::StatusOr<Value> ToJsonFilter(const Value& v, const CallArgs& args) {
  ASSIGN_OR_RETURN(Args a, BindArgs("tojson", args,
                                    {{"ensure_ascii", Value::Bool(false)},
                                     {"indent", Value::None()},
                                     {"separators", Value::None()},
                                     {"sort_keys", Value::Bool(false)}}));
  JsonDumpOptions options;
  options.ensure_ascii = a[0].Truthy();
  if (a[1].is_int()) {
    options.indent = std::string(std::max<int64_t>(a[1].as_int(), 0), ' ');
  } else if (a[1].is_string()) {
    options.indent = a[1].as_string();
  } else if (!a[1].is_none()) {
    return Invalid("tojson", "indent must be an int, a str or None");
  }
  if (options.indent) options.item_separator = ",";
  if (!a[2].is_none()) {
    if (!a[2].is_list() || a[2].as_list().size() != 2 || !a[2].as_list()[0].is_string() ||
        !a[2].as_list()[1].is_string()) {
      return Invalid("tojson", "separators must be a pair of strings");
    }
    options.item_separator = a[2].as_list()[0].as_string();
    options.key_separator = a[2].as_list()[1].as_string();
  }
  options.sort_keys = a[3].Truthy();
  ASSIGN_OR_RETURN(std::string text, DumpJson(v, options));
  return Value::String(std::move(text));
}

std::string Indent(std::string s, const Value& width, bool first, bool blank) {
  std::string indention =
      width.is_string() ? width.as_string() : std::string(std::max<int64_t>(width.as_int(), 0), ' ');
  s += "\n";
  std::vector<std::string> lines = PySplit(s, std::string("\n"), -1);
  lines.pop_back();  // the piece after the newline added above, as str.splitlines() drops it
  std::string rv;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) rv += "\n";
    if (i > 0 && (blank || !lines[i].empty())) rv += indention;
    rv += lines[i];
  }
  if (first) rv = indention + rv;
  return rv;
}

absl::StatusOr<Value> ToInt(const Value& v, const Value& fallback) {
  if (v.is_int() || v.is_bool()) return Value::Int(v.as_int());
  if (v.is_float()) {
    if (!std::isfinite(v.as_float())) return fallback;
    return Value::Int(static_cast<int64_t>(v.as_float()));
  }
  if (v.is_string()) {
    std::string s = PyStrip(v.as_string(), std::nullopt, true, true);
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    char* end = nullptr;
    errno = 0;
    long long i = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && *end == '\0' && errno == 0) return Value::Int(i);
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0' && std::isfinite(d)) return Value::Int(static_cast<int64_t>(d));
  }
  return fallback;
}

absl::StatusOr<Value> ToFloat(const Value& v, const Value& fallback) {
  if (v.is_number()) return Value::Float(v.as_float());
  if (v.is_string()) {
    std::string s = PyStrip(v.as_string(), std::nullopt, true, true);
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0') return Value::Float(d);
  }
  return fallback;
}

absl::StatusOr<Value> Round(const Value& v, int64_t precision, const std::string& method) {
  if (!v.is_number()) return Invalid("round", "expected a number");
  double x = v.as_float();
  double scale = std::pow(10.0, static_cast<double>(precision));
  if (method == "ceil") return Value::Float(std::ceil(x * scale) / scale);
  if (method == "floor") return Value::Float(std::floor(x * scale) / scale);
  if (method != "common") return Invalid("round", "method must be common, ceil or floor");
  // Python's round() rounds the exact binary value half-to-even; printf does the same.
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(std::clamp<int64_t>(precision, 0, 300)), x);
  return Value::Float(std::strtod(buf, nullptr));
}

// select/reject/selectattr/rejectattr: keeps items whose test (or truthiness) is `keep`.
absl::StatusOr<Value> SelectOrReject(const Value& input, const CallArgs& args, bool keep,
                                     bool by_attribute, std::string_view filter) {
  size_t next = 0;
  Value attribute;
  if (by_attribute) {
    if (args.positional.empty()) return Invalid(filter, "missing the attribute name");
    attribute = args.positional[next++];
  }
  std::string test;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) return Invalid(filter, "the test name must be a string");
    test = args.positional[next++].as_string();
  }
  CallArgs test_args;
  test_args.positional.assign(args.positional.begin() + next, args.positional.end());
  test_args.keyword = args.keyword;
  ASSIGN_OR_RETURN(ValueList items, Iterate(input));
  ValueList out;
  for (const Value& item : items) {
    Value subject = item;
    if (by_attribute) {
      ASSIGN_OR_RETURN(subject, LookupPath(item, attribute));
    }
    bool passed;
    if (test.empty()) {
      passed = subject.Truthy();
    } else {
      ASSIGN_OR_RETURN(passed, ApplyTest(test, subject, test_args));
    }
    if (passed == keep) out.push_back(item);
  }
  return Value::Sequence(std::move(out), Seq::kGenerator);
}

absl::StatusOr<Value> Map(const Value& input, const CallArgs& args, const SizeLimits& limits) {
  ASSIGN_OR_RETURN(ValueList items, Iterate(input));
  ValueList out;
  const Value* attribute = nullptr;
  Value fallback;
  for (const auto& [k, v] : args.keyword) {
    if (k == "attribute") attribute = &v;
    if (k == "default") fallback = v;
  }
  if (attribute != nullptr) {
    for (const Value& item : items) {
      ASSIGN_OR_RETURN(Value mapped, LookupPath(item, *attribute));
      out.push_back(mapped.is_undefined() && !fallback.is_undefined() ? fallback : mapped);
    }
  } else {
    if (args.positional.empty() || !args.positional[0].is_string()) {
      return Invalid("map", "expected a filter name or attribute=");
    }
    std::string name = args.positional[0].as_string();
    if (!IsKnownFilter(name)) return Invalid("map", absl::StrCat("no filter named '", name, "'"));
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.keyword = args.keyword;
    for (const Value& item : items) {
      ASSIGN_OR_RETURN(Value mapped, ApplyFilter(name, item, rest, limits));
      out.push_back(std::move(mapped));
    }
  }
  return Value::Sequence(std::move(out), Seq::kGenerator);
}

absl::StatusOr<Value> Join(const Value& input, const CallArgs& args, const SizeLimits& limits) {
  ASSIGN_OR_RETURN(Args a, BindArgs("join", args, {{"d", Value::String("")},
                                                    {"attribute", Value::None()}}));
  ASSIGN_OR_RETURN(ValueList items, Iterate(input));
  std::string sep = a[0].Str();
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    Value item = items[i];
    if (!a[1].is_none()) {
      ASSIGN_OR_RETURN(item, LookupPath(item, a[1]));
    }
    if (i > 0) out += sep;
    out += item.Str();
    if (out.size() > limits.max_bytes) {
      return absl::ResourceExhaustedError("chat template: a joined string exceeds the size limit");
    }
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> Sort(const Value& input, const CallArgs& args, bool unique) {
  std::vector<Param> params;
  if (!unique) params.push_back({"reverse", Value::Bool(false)});
  params.push_back({"case_sensitive", Value::Bool(false)});
  params.push_back({"attribute", Value::None()});
  ASSIGN_OR_RETURN(Args a, BindArgs(unique ? "unique" : "sort", args, params));
  bool reverse = unique ? false : a[0].Truthy();
  bool case_sensitive = a[unique ? 0 : 1].Truthy();
  const Value& attribute = a[unique ? 1 : 2];
  ASSIGN_OR_RETURN(ValueList items, Iterate(input));
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : items) {
    Value key = item;
    if (!attribute.is_none()) {
      ASSIGN_OR_RETURN(key, LookupPath(item, attribute));
    }
    keyed.emplace_back(SortKey(key, case_sensitive), item);
  }
  ValueList out;
  if (unique) {
    std::vector<Value> seen;
    for (const auto& entry : keyed) {
      // Named, not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
      const Value& key = entry.first;
      const Value& item = entry.second;
      if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return Equals(s, key); })) {
        continue;
      }
      seen.push_back(key);
      out.push_back(item);
    }
    return Value::Sequence(std::move(out), Seq::kGenerator);
  }
  RETURN_IF_ERROR(SortValues(&keyed, reverse));
  for (auto& [key, item] : keyed) out.push_back(std::move(item));
  return Value::List(std::move(out));
}

absl::StatusOr<Value> DictSort(const Value& input, const CallArgs& args) {
  ASSIGN_OR_RETURN(Args a, BindArgs("dictsort", args, {{"case_sensitive", Value::Bool(false)},
                                                       {"by", Value::String("key")},
                                                       {"reverse", Value::Bool(false)}}));
  if (!input.is_dict() || input.is_namespace()) return Invalid("dictsort", "expected a mapping");
  bool by_value = a[1].Str() == "value";
  if (!by_value && a[1].Str() != "key") return Invalid("dictsort", "by must be 'key' or 'value'");
  std::vector<std::pair<Value, Value>> keyed;
  for (const auto& [k, v] : input.as_dict()) {
    keyed.emplace_back(SortKey(by_value ? v : k, a[0].Truthy()), Value::List({k, v}, true));
  }
  RETURN_IF_ERROR(SortValues(&keyed, a[2].Truthy()));
  ValueList out;
  for (auto& [key, item] : keyed) out.push_back(std::move(item));
  return Value::List(std::move(out));
}

absl::StatusOr<Value> MinMax(const Value& input, const CallArgs& args, bool want_max) {
  ASSIGN_OR_RETURN(Args a, BindArgs(want_max ? "max" : "min", args,
                                    {{"case_sensitive", Value::Bool(false)},
                                     {"attribute", Value::None()}}));
  ASSIGN_OR_RETURN(ValueList items, Iterate(input));
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  Value best, best_key;
  for (const Value& item : items) {
    Value key = item;
    if (!a[1].is_none()) {
      ASSIGN_OR_RETURN(key, LookupPath(item, a[1]));
    }
    key = SortKey(key, a[0].Truthy());
    if (best_key.is_undefined() && best.is_undefined()) {
      best = item;
      best_key = key;
      continue;
    }
    ASSIGN_OR_RETURN(bool better, want_max ? LessThan(best_key, key) : LessThan(key, best_key));
    if (better) {
      best = item;
      best_key = key;
    }
  }
  return best;
}

}  // namespace

bool IsKnownFilter(std::string_view name) {
  return std::find(std::begin(kFilters), std::end(kFilters), name) != std::end(kFilters);
}

absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& v, const CallArgs& args,
                                  const SizeLimits& limits) {
  auto bind = [&](std::vector<Param> params) { return BindArgs(name, args, params); };
  if (name == "default" || name == "d") {
    ASSIGN_OR_RETURN(Args a, bind({{"default_value", Value::String("")},
                                   {"boolean", Value::Bool(false)}}));
    if (v.is_undefined() || (a[1].Truthy() && !v.Truthy())) return a[0];
    return v;
  }
  if (name == "length" || name == "count") return Length(v);
  if (name == "tojson") return ToJsonFilter(v, args);
  if (name == "join") return Join(v, args, limits);
  if (name == "map") return Map(v, args, limits);
  if (name == "select" || name == "reject") {
    return SelectOrReject(v, args, name == "select", false, name);
  }
  if (name == "selectattr" || name == "rejectattr") {
    return SelectOrReject(v, args, name == "selectattr", true, name);
  }
  if (name == "sort") return Sort(v, args, false);
  if (name == "unique") return Sort(v, args, true);
  if (name == "dictsort") return DictSort(v, args);
  if (name == "max" || name == "min") return MinMax(v, args, name == "max");
  if (name == "trim") {
    ASSIGN_OR_RETURN(Args a, bind({{"chars", Value::None()}}));
    std::optional<std::string> chars;
    if (!a[0].is_none()) chars = a[0].Str();
    return Value::String(PyStrip(v.Str(), chars, true, true));
  }
  if (name == "upper" || name == "lower" || name == "capitalize" || name == "title") {
    RETURN_IF_ERROR(bind({}).status());
    std::string s = v.Str();
    if (name == "upper") return Value::String(PyUpper(s));
    if (name == "lower") return Value::String(PyLower(s));
    if (name == "capitalize") return Value::String(PyCapitalize(s));
    return Value::String(JinjaTitle(s));
  }
  if (name == "replace") {
    ASSIGN_OR_RETURN(Args a, bind({{"old", std::nullopt}, {"new", std::nullopt},
                                   {"count", Value::None()}}));
    int64_t count = a[2].is_none() ? -1 : a[2].as_int();
    return Value::String(PyReplace(v.Str(), a[0].Str(), a[1].Str(), count));
  }
  if (name == "string" || name == "safe") return Value::String(v.Str());
  if (name == "e" || name == "escape" || name == "forceescape") {
    return Value::String(HtmlEscape(v.Str()));
  }
  if (name == "indent") {
    ASSIGN_OR_RETURN(Args a, bind({{"width", Value::Int(4)}, {"first", Value::Bool(false)},
                                   {"blank", Value::Bool(false)}}));
    return Value::String(Indent(v.Str(), a[0], a[1].Truthy(), a[2].Truthy()));
  }
  if (name == "center") {
    ASSIGN_OR_RETURN(Args a, bind({{"width", Value::Int(80)}}));
    std::string s = v.Str();
    int64_t width = a[0].as_int(), len = static_cast<int64_t>(PyLength(s));
    if (width <= len) return Value::String(s);
    int64_t margin = width - len;
    int64_t left = margin / 2 + (margin & width & 1);  // CPython's str.center
    return Value::String(std::string(left, ' ') + s + std::string(margin - left, ' '));
  }
  if (name == "wordcount") {
    int64_t words = 0;
    bool in_word = false;
    for (char32_t c : DecodeUtf8(v.Str())) {
      bool word_char = IsWordChar(c);
      if (word_char && !in_word) ++words;
      in_word = word_char;
    }
    return Value::Int(words);
  }
  if (name == "int") {
    ASSIGN_OR_RETURN(Args a, bind({{"default", Value::Int(0)}, {"base", Value::Int(10)}}));
    return ToInt(v, a[0]);
  }
  if (name == "float") {
    ASSIGN_OR_RETURN(Args a, bind({{"default", Value::Float(0.0)}}));
    return ToFloat(v, a[0]);
  }
  if (name == "abs") {
    if (v.is_float()) return Value::Float(std::fabs(v.as_float()));
    if (v.is_int() || v.is_bool()) return UnaryOp(v.as_int() < 0 ? "-" : "+", v);
    return Invalid(name, absl::StrCat("bad operand type for abs(): '", v.TypeName(), "'"));
  }
  if (name == "round") {
    ASSIGN_OR_RETURN(Args a, bind({{"precision", Value::Int(0)},
                                   {"method", Value::String("common")}}));
    return Round(v, a[0].as_int(), a[1].Str());
  }
  if (name == "sum") {
    ASSIGN_OR_RETURN(Args a, bind({{"attribute", Value::None()}, {"start", Value::Int(0)}}));
    ASSIGN_OR_RETURN(ValueList items, Iterate(v));
    Value total = a[1];
    for (const Value& item : items) {
      Value term = item;
      if (!a[0].is_none()) {
        ASSIGN_OR_RETURN(term, LookupPath(item, a[0]));
      }
      ASSIGN_OR_RETURN(total, BinaryOp("+", total, term, limits));
    }
    return total;
  }
  if (name == "list" || name == "first" || name == "last" || name == "reverse") {
    RETURN_IF_ERROR(bind({}).status());
    if (name == "reverse" && v.is_string()) {
      std::u32string cps = DecodeUtf8(v.as_string());
      std::reverse(cps.begin(), cps.end());
      return Value::String(EncodeUtf8(cps));
    }
    if (name == "last" && v.is_generator()) {
      return Invalid(name, "'generator' object is not reversible");
    }
    ASSIGN_OR_RETURN(ValueList items, Iterate(v));
    if (name == "list") return Value::List(std::move(items));
    if (name == "reverse") {
      std::reverse(items.begin(), items.end());
      return Value::Sequence(std::move(items), v.is_generator() ? Seq::kList : Seq::kGenerator);
    }
    if (items.empty()) return Value::Undefined(absl::StrCat("No ", ToAbsl(name), " item, sequence was empty."));
    return name == "first" ? items.front() : items.back();
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::List({});
    if (!v.is_dict() || v.is_namespace()) return Invalid(name, "Can only get item pairs from a mapping.");
    ValueList out;
    for (const auto& [k, item] : v.as_dict()) out.push_back(Value::List({k, item}, true));
    return Value::List(std::move(out));
  }
  if (name == "attr") {
    ASSIGN_OR_RETURN(Args a, bind({{"name", std::nullopt}}));
    // Attribute only, never the item: d|attr('x') is Undefined for a dict with key 'x'.
    if (v.is_namespace()) return GetAttr(v, a[0].Str());
    if (v.is_dict() && v.Find(a[0].Str()) != nullptr) {
      return Value::Undefined(absl::StrCat("'dict object' has no attribute '", a[0].Str(), "'"));
    }
    return GetAttr(v, a[0].Str());
  }
  return absl::InvalidArgumentError(absl::StrCat("no filter named '", ToAbsl(name), "'"));
}

}  // namespace baton::runtime::jinja
