#include "runtime/tokenizer/jinja/globals.h"

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "runtime/tokenizer/jinja/call_args.h"
#include "runtime/tokenizer/jinja/interpreter.h"

namespace baton::runtime::jinja {
namespace {

absl::StatusOr<Value> Range(const CallArgs& args, const SizeLimits& limits) {
  if (!args.keyword.empty()) return absl::InvalidArgumentError("range() takes no keyword arguments");
  std::vector<int64_t> n;
  for (const Value& v : args.positional) {
    if (!v.is_int() && !v.is_bool()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", v.TypeName(), "' object cannot be interpreted as an integer"));
    }
    n.push_back(v.as_int());
  }
  if (n.empty() || n.size() > 3) return absl::InvalidArgumentError("range expects 1 to 3 arguments");
  int64_t start = n.size() == 1 ? 0 : n[0];
  int64_t stop = n.size() == 1 ? n[0] : n[1];
  int64_t step = n.size() == 3 ? n[2] : 1;
  if (step == 0) return absl::InvalidArgumentError("range() arg 3 must not be zero");
  __int128 count = step > 0 ? (static_cast<__int128>(stop) - start + step - 1) / step
                            : (static_cast<__int128>(start) - stop - step - 1) / -step;
  if (count > static_cast<__int128>(limits.max_items)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("chat template: range() longer than ", limits.max_items, " items"));
  }
  ValueList items;
  for (int64_t i = 0; i < count; ++i) items.push_back(Value::Int(start + i * step));
  return Value::List(std::move(items));
}

// dict(mapping_or_pairs, **kwargs) as Python builds it.
absl::StatusOr<ValueDict> BuildDict(const CallArgs& args, std::string_view function) {
  if (args.positional.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(function), " expected at most 1 positional argument"));
  }
  ValueDict items;
  auto put = [&items](const Value& key, const Value& value) {
    for (auto& [k, v] : items) {
      if (Equals(k, key)) {
        v = value;
        return;
      }
    }
    items.emplace_back(key, value);
  };
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.is_dict() && !source.is_namespace()) {
      for (const auto& [k, v] : source.as_dict()) put(k, v);
    } else if (source.is_list()) {
      for (const Value& pair : source.as_list()) {
        if (!pair.is_list() || pair.as_list().size() != 2) {
          return absl::InvalidArgumentError("dictionary update sequence element is not a pair");
        }
        put(pair.as_list()[0], pair.as_list()[1]);
      }
    } else if (!source.is_undefined()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", source.TypeName(), "' object is not a mapping or a sequence of pairs"));
    }
  }
  for (const auto& [k, v] : args.keyword) put(Value::String(k), v);
  return items;
}

}  // namespace

std::vector<std::pair<std::string, Value>> MakeGlobals(std::optional<std::time_t> now,
                                                       const SizeLimits& limits) {
  std::vector<std::pair<std::string, Value>> globals;
  globals.emplace_back("range", Value::Function("range", [limits](const CallArgs& args) {
                         return Range(args, limits);
                       }));
  globals.emplace_back("dict", Value::Function("dict", [](const CallArgs& args)
                                                           -> absl::StatusOr<Value> {
                         ASSIGN_OR_RETURN(ValueDict items, BuildDict(args, "dict"));
                         return Value::Dict(std::move(items));
                       }));
  globals.emplace_back("namespace", Value::Function("namespace", [](const CallArgs& args)
                                                                     -> absl::StatusOr<Value> {
                         ASSIGN_OR_RETURN(ValueDict items, BuildDict(args, "namespace"));
                         for (const auto& [k, v] : items) {
                           if (v.contains_namespace() || v.depth() >= kNamespaceDepth) {
                             return absl::InvalidArgumentError(
                                 "namespace(): values holding a namespace or nested too deeply "
                                 "are not supported");
                           }
                         }
                         return Value::Dict(std::move(items), /*is_namespace=*/true);
                       }));
  globals.emplace_back(
      "raise_exception", Value::Function("raise_exception", [](const CallArgs& args)
                                                                -> absl::StatusOr<Value> {
        ASSIGN_OR_RETURN(std::vector<Value> a,
                         BindArgs("raise_exception", args, {{"message", std::nullopt}}));
        absl::Status status = absl::InvalidArgumentError(a[0].Str());
        status.SetPayload(kRaisedPayload, absl::Cord("1"));
        return status;
      }));
  globals.emplace_back(
      "strftime_now", Value::Function("strftime_now", [now](const CallArgs& args)
                                                          -> absl::StatusOr<Value> {
        ASSIGN_OR_RETURN(std::vector<Value> a,
                         BindArgs("strftime_now", args, {{"format", std::nullopt}}));
        std::time_t t = now.has_value() ? *now : std::time(nullptr);
        std::tm tm{};
        localtime_r(&t, &tm);
        std::string format = a[0].Str();
        if (format.empty()) return Value::String("");
        // strftime returns 0 both for "too small" and for an empty result; grow a few times.
        for (size_t size = 256; size <= 65536; size *= 4) {
          std::string buf(size, '\0');
          size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &tm);
          if (n > 0) return Value::String(buf.substr(0, n));
        }
        return Value::String("");
      }));
  return globals;
}

}  // namespace baton::runtime::jinja
