// Typed reads of OpenAI request fields from a JSON body, shared by the endpoints' conversions
// (openai_completion.cc, openai_chat.cc): absent or null leaves the value unchanged; a wrong type or
// an out-of-range number is InvalidArgument naming the field as the client spelled it.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace baton::scheduler {

// Whether an integer JSON value fits T (nlohmann's get<T> would wrap or truncate it silently).
template <typename T>
bool FitsInteger(const nlohmann::json& value) {
  if (value.is_number_unsigned()) {
    return value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  }
  const int64_t v = value.get<int64_t>();
  if constexpr (std::is_unsigned_v<T>) {
    return v >= 0 && static_cast<uint64_t>(v) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  } else {
    return v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
           v <= static_cast<int64_t>(std::numeric_limits<T>::max());
  }
}

// Reads a number field of the expected kind and range; InvalidArgument naming the field otherwise.
template <typename T>
absl::Status ReadNumber(const nlohmann::json& body, const char* field, T* out) {
  if (!body.contains(field) || body[field].is_null()) return absl::OkStatus();
  const nlohmann::json& value = body[field];
  if (!value.is_number() || (std::is_integral_v<T> && !value.is_number_integer())) {
    return absl::InvalidArgumentError(absl::StrCat("'", field, "' must be ",
                                                   std::is_integral_v<T> ? "an integer" : "a number"));
  }
  if constexpr (std::is_integral_v<T>) {
    if (!FitsInteger<T>(value)) {
      return absl::InvalidArgumentError(absl::StrCat("'", field, "' is out of range: ", value.dump(),
                                                     " (the largest accepted is ",
                                                     std::numeric_limits<T>::max(), ")"));
    }
  } else {
    const double v = value.get<double>();
    if (!std::isfinite(v) || std::abs(v) > std::numeric_limits<T>::max()) {
      return absl::InvalidArgumentError(absl::StrCat("'", field, "' is out of range: ", value.dump()));
    }
  }
  *out = value.get<T>();
  return absl::OkStatus();
}

// Reads a boolean field (absent or null: *out unchanged); InvalidArgument naming the field otherwise.
inline absl::Status ReadBool(const nlohmann::json& object, const char* field, bool* out) {
  if (!object.contains(field) || object[field].is_null()) return absl::OkStatus();
  if (!object[field].is_boolean()) {
    return absl::InvalidArgumentError(absl::StrCat("'", field, "' must be true or false"));
  }
  *out = object[field].get<bool>();
  return absl::OkStatus();
}

}  // namespace baton::scheduler
