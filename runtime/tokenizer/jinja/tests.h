// jinja2's `is` tests (defined, none, string, mapping, divisibleby, equalto, ...).
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/jinja/call_args.h"
#include "runtime/tokenizer/jinja/value.h"

namespace baton::runtime::jinja {

bool IsKnownTest(std::string_view name);

// `value is name(args)`. InvalidArgument for an unknown test or bad arguments.
absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& value, const CallArgs& args);

}  // namespace baton::runtime::jinja
