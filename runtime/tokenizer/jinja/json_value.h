// Conversions between JSON and template values: the request's messages and tools come in as JSON,
// and the `tojson` filter writes JSON the way transformers' override of it does (Python's
// json.dumps, ensure_ascii=False by default, no HTML escaping).
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/tokenizer/jinja/value.h"

namespace baton::runtime::jinja {

// JSON objects keep their member order (ordered_json) or come sorted (json), as stored.
// InvalidArgument when nesting exceeds kMaxValueDepth.
absl::StatusOr<Value> FromJson(const nlohmann::ordered_json& json);
absl::StatusOr<Value> FromJson(const nlohmann::json& json);

struct JsonDumpOptions {
  std::optional<std::string> indent;  // nullopt: one line; "" (indent=0) still breaks lines
  std::string item_separator = ", ";  // Python's default is "," when indent is set
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};

// Python's json.dumps(value, ...). InvalidArgument for Undefined, callables and namespaces, which
// Python cannot serialize either.
absl::StatusOr<std::string> DumpJson(const Value& value, const JsonDumpOptions& options);

}  // namespace baton::runtime::jinja
