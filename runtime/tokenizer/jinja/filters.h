// jinja2's built-in filters that chat templates use, plus transformers' `tojson` (json.dumps with
// ensure_ascii=False, optional indent/separators/sort_keys, no HTML escaping). Filters that return
// generators in jinja2 (map, select, reject, selectattr, rejectattr, unique, reverse of a list)
// return generator-flagged lists here, so truthiness and printing match.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/jinja/call_args.h"
#include "runtime/tokenizer/jinja/operators.h"
#include "runtime/tokenizer/jinja/value.h"

namespace baton::runtime::jinja {

bool IsKnownFilter(std::string_view name);

// `input | name(args)`. InvalidArgument for bad arguments or types, ResourceExhausted past `limits`.
absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& input, const CallArgs& args,
                                  const SizeLimits& limits);

}  // namespace baton::runtime::jinja
