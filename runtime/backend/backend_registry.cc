#include "runtime/backend/backend_registry.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "runtime/backend/cpu_backend.h"
#include "runtime/backend/emulated_gpu_runtime.h"
#include "runtime/backend/gpu_backend.h"
#if BATON_HAS_CUDA
#include "kernels/common/status_macros.h"
#include "runtime/backend/cuda_gpu_runtime.h"
#endif

namespace baton::runtime {

absl::string_view DeviceKindName(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCpu:
      return "cpu";
    case DeviceKind::kCuda:
      return "cuda";
    case DeviceKind::kCudaEmulated:
      return "cuda-emulated";
  }
  return "unknown";
}

absl::StatusOr<DeviceSpec> ParseDevice(absl::string_view text) {
  if (text == "cpu") return DeviceSpec{.kind = DeviceKind::kCpu};
  if (text == "cuda-emulated") return DeviceSpec{.kind = DeviceKind::kCudaEmulated};
  if (text == "cuda") return DeviceSpec{.kind = DeviceKind::kCuda};
  int index = 0;
  if (absl::ConsumePrefix(&text, "cuda:") && absl::SimpleAtoi(text, &index) && index >= 0) {
    return DeviceSpec{.kind = DeviceKind::kCuda, .index = index};
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "device \"", text, "\": expected cpu, cuda, cuda:N or cuda-emulated"));
}

absl::StatusOr<std::unique_ptr<DeviceBackend>> CreateBackend(const BackendOptions& options) {
  switch (options.device) {
    case DeviceKind::kCpu:
      return std::make_unique<CpuBackend>(options.pool);
    case DeviceKind::kCudaEmulated:
      return std::make_unique<GpuBackend>(DeviceKind::kCudaEmulated,
                                          std::make_unique<EmulatedGpuRuntime>());
    case DeviceKind::kCuda: {
#if BATON_HAS_CUDA
      ASSIGN_OR_RETURN(std::unique_ptr<CudaGpuRuntime> runtime,
                       CudaGpuRuntime::Create(options.device_index));
      return std::make_unique<GpuBackend>(DeviceKind::kCuda, std::move(runtime));
#else
      break;
#endif
    }
  }
  return absl::UnimplementedError(absl::StrCat("no ", DeviceKindName(options.device),
                                               " backend in this build"));
}

}  // namespace baton::runtime
