// Arguments of a call, filter, test or method, and binding them to a Python-style signature:
// `BindArgs("indent", args, {{"width", Value::Int(4)}, {"first", Value::Bool(false)}})`.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/jinja/value.h"

namespace baton::runtime::jinja {

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

struct Param {
  std::string name;
  std::optional<Value> default_value;  // nullopt: required
};

// One value per parameter, in order: positional arguments first, then keywords by name, then
// defaults. InvalidArgument naming `function` for a missing, unknown or repeated argument.
absl::StatusOr<std::vector<Value>> BindArgs(std::string_view function, const CallArgs& args,
                                            const std::vector<Param>& params);

}  // namespace baton::runtime::jinja
