// Invariant checks that abort: for conditions that mean a bug or memory corruption (a block freed
// twice, a refcount below zero), never for bad input, which gets an absl::Status. The pinned abseil
// predates absl/log, so this is the project's one CHECK.
#pragma once

#include <cstdio>
#include <cstdlib>

#define BATON_CHECK(cond)                                                              \
  do {                                                                                 \
    if (!(cond)) [[unlikely]] {                                                        \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
      std::abort();                                                                    \
    }                                                                                  \
  } while (false)

#ifdef NDEBUG
#define BATON_DCHECK(cond) \
  do {                     \
  } while (false && (cond))
#else
#define BATON_DCHECK(cond) BATON_CHECK(cond)
#endif
