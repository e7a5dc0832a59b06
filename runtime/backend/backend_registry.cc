#include "runtime/backend/backend_registry.h"

#include "absl/strings/str_cat.h"
#include "runtime/backend/cpu_backend.h"

namespace baton::runtime {

absl::string_view DeviceKindName(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCpu:
      return "cpu";
    case DeviceKind::kCuda:
      return "cuda";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<DeviceBackend>> CreateBackend(const BackendOptions& options) {
  switch (options.device) {
    case DeviceKind::kCpu:
      return std::make_unique<CpuBackend>(options.pool);
    case DeviceKind::kCuda:
      break;
  }
  return absl::UnimplementedError(absl::StrCat("no ", DeviceKindName(options.device),
                                               " backend in this build"));
}

}  // namespace baton::runtime
