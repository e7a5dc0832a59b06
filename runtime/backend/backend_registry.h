// Where a rank's backend is chosen: the one place that maps a device kind to an implementation
// (and, once the CUDA backend exists, the only file of runtime/ with `#if BATON_HAS_CUDA`).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/common/thread_pool.h"
#include "runtime/backend/device_backend.h"

namespace baton::runtime {

struct BackendOptions {
  DeviceKind device = DeviceKind::kCpu;
  // CPU: the pool the kernels split their loops over (may be nullptr); must outlive the backend.
  ThreadPool* pool = nullptr;
};

// Unimplemented for a device kind this build has no backend for.
absl::StatusOr<std::unique_ptr<DeviceBackend>> CreateBackend(const BackendOptions& options);

}  // namespace baton::runtime
