// Attribute access, subscripts, slices, iteration and the Python methods templates call on
// strings, dicts and lists (`content.strip()`, `tool.items()`, `message.get('name')`), with
// jinja2's sandboxed lookup rules: `a.b` tries the attribute then the item, `a['b']` the item then
// the attribute, and a miss is Undefined rather than an error. Methods that mutate (list.append,
// dict.update) are refused, as in transformers' ImmutableSandboxedEnvironment.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/jinja/value.h"

namespace baton::runtime::jinja {

// InvalidArgument only when `object` is Undefined (jinja2's UndefinedError).
absl::StatusOr<Value> GetAttr(const Value& object, std::string_view name);
absl::StatusOr<Value> GetItem(const Value& object, const Value& key);
// object[start:stop:step] on lists, tuples and strings; absent bounds are Undefined.
absl::StatusOr<Value> GetSlice(const Value& object, const Value& start, const Value& stop,
                               const Value& step);

// The items a `for` loop visits: list items, string characters, dict keys; nothing for Undefined.
// InvalidArgument for values that are not iterable.
absl::StatusOr<ValueList> Iterate(const Value& value);

// jinja2's UndefinedError for an operation on `undefined`.
absl::Status UndefinedError(const Value& undefined);

}  // namespace baton::runtime::jinja
