// Where a rank's backend is chosen: the one place that maps a device kind to an implementation, and
// the only file of runtime/backend with `#if BATON_HAS_CUDA` (backend_registry.cc).
//   kCpu          CpuBackend (every build)
//   kCudaEmulated GpuBackend over EmulatedGpuRuntime (every build; tests and CI)
//   kCuda         GpuBackend over CudaGpuRuntime on device `device_index` (builds with CUDA)
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/common/thread_pool.h"
#include "runtime/backend/device_backend.h"

namespace baton::runtime {

struct BackendOptions {
  DeviceKind device = DeviceKind::kCpu;
  // CPU: the pool the kernels split their loops over (may be nullptr); must outlive the backend.
  ThreadPool* pool = nullptr;
  // kCuda: the CUDA device (cudaSetDevice index) of this rank.
  int device_index = 0;
};

// A device as users name it: "cpu", "cuda-emulated", "cuda" (device 0) or "cuda:N".
struct DeviceSpec {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;  // kCuda: the first CUDA device of the instance; its ranks take index, index + 1, ...
};
// InvalidArgument, naming the accepted forms, for anything else.
absl::StatusOr<DeviceSpec> ParseDevice(absl::string_view text);

// Unimplemented for a device kind this build has no backend for; for kCuda, Unavailable when there
// is no CUDA driver or device, InvalidArgument for a device_index out of range.
absl::StatusOr<std::unique_ptr<DeviceBackend>> CreateBackend(const BackendOptions& options);

}  // namespace baton::runtime
