// Status propagation macros. The pinned abseil (Debian's 20220623) has no ABSL_RETURN_IF_ERROR, so
// these are ours; once abseil >= 20260526 is the floor they become aliases of the abseil ones.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define BATON_STATUS_CONCAT_INNER(a, b) a##b
#define BATON_STATUS_CONCAT(a, b) BATON_STATUS_CONCAT_INNER(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                      \
  do {                                             \
    if (absl::Status _baton_status = (expr);       \
        !_baton_status.ok()) [[unlikely]] {        \
      return _baton_status;                        \
    }                                              \
  } while (false)

// ASSIGN_OR_RETURN(lhs, expr): evaluates `expr` (an absl::StatusOr<T>); on error returns its status,
// otherwise moves the value into `lhs` (which may be a declaration such as `auto x`).
#define ASSIGN_OR_RETURN(lhs, expr) \
  BATON_ASSIGN_OR_RETURN_IMPL(BATON_STATUS_CONCAT(_baton_statusor_, __LINE__), lhs, expr)

#define BATON_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr) \
  auto statusor = (expr);                                \
  if (!statusor.ok()) [[unlikely]] {                     \
    return std::move(statusor).status();                 \
  }                                                      \
  lhs = std::move(statusor).value()
