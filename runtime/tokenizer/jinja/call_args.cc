#include "runtime/tokenizer/jinja/call_args.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/tokenizer/absl_compat.h"

namespace baton::runtime::jinja {

absl::StatusOr<std::vector<Value>> BindArgs(std::string_view function, const CallArgs& args,
                                            const std::vector<Param>& params) {
  if (args.positional.size() > params.size()) {
    return absl::InvalidArgumentError(absl::StrCat(ToAbsl(function), "() takes at most ",
                                                   params.size(), " arguments, got ",
                                                   args.positional.size()));
  }
  std::vector<std::optional<Value>> bound(params.size());
  for (size_t i = 0; i < args.positional.size(); ++i) bound[i] = args.positional[i];
  for (const auto& [name, value] : args.keyword) {
    size_t i = 0;
    while (i < params.size() && params[i].name != name) ++i;
    if (i == params.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(ToAbsl(function), "() got an unexpected keyword argument '", name, "'"));
    }
    if (bound[i].has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(ToAbsl(function), "() got multiple values for argument '", name, "'"));
    }
    bound[i] = value;
  }
  std::vector<Value> out;
  out.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (bound[i].has_value()) {
      out.push_back(*std::move(bound[i]));
    } else if (params[i].default_value.has_value()) {
      out.push_back(*params[i].default_value);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          ToAbsl(function), "() missing required argument '", params[i].name, "'"));
    }
  }
  return out;
}

}  // namespace baton::runtime::jinja
