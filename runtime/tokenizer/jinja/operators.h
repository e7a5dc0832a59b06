// Python's arithmetic, `~` concatenation, comparison and membership on template values. Results
// bigger than `max_bytes` (strings) or `max_items` (lists) fail with ResourceExhausted so that
// `'x' * 10**12` cannot exhaust memory.
#pragma once

#include <cstddef>
#include <string_view>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/jinja/value.h"

namespace baton::runtime::jinja {

struct SizeLimits {
  size_t max_bytes = 0;
  size_t max_items = 0;
};

// op: + - * / // % ** ~
absl::StatusOr<Value> BinaryOp(std::string_view op, const Value& a, const Value& b,
                               const SizeLimits& limits);
// op: - +
absl::StatusOr<Value> UnaryOp(std::string_view op, const Value& a);
// op: == != < <= > >= in, not in
absl::StatusOr<bool> CompareOp(std::string_view op, const Value& a, const Value& b);
// Python's `needle in haystack`.
absl::StatusOr<bool> Contains(const Value& haystack, const Value& needle);

}  // namespace baton::runtime::jinja
