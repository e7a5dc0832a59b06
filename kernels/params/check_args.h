// Small helpers shared by the Validate() functions: each returns InvalidArgument with a message that
// names the op and the offending field, or OK.
#pragma once

#include <cstdint>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace baton::kernels::internal {

// `ptr` must be non-null unless `may_be_null` (typically: the op has zero rows).
inline absl::Status CheckPointer(absl::string_view op, absl::string_view field, const void* ptr,
                                 bool may_be_null = false) {
  if (ptr == nullptr && !may_be_null) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", field, " is null"));
  }
  return absl::OkStatus();
}

inline absl::Status CheckAtLeast(absl::string_view op, absl::string_view field, int64_t value,
                                 int64_t min) {
  if (value < min) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", field, " = ", value, " must be >= ", min));
  }
  return absl::OkStatus();
}

}  // namespace baton::kernels::internal
