// MeasureEmulatedRoofline: the cuda-emulated device's copy and GEMM through its own runtime
// (runtime/backend/emulated_gpu_runtime.h), wall-clock timed (each call runs to completion).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "benchmarks/gpu/roofline.h"
#include "kernels/common/status_macros.h"
#include "runtime/backend/emulated_gpu_runtime.h"

namespace baton::bench {
namespace {

absl::StatusOr<double> BestSeconds(int repeats, const std::function<absl::Status()>& run) {
  RETURN_IF_ERROR(run());  // warm-up: first-touch page faults
  double best = 0;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(run());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (i == 0 || s < best) best = s;
  }
  return best;
}

}  // namespace

absl::StatusOr<Roofline> MeasureEmulatedRoofline(const RooflineOptions& options) {
  runtime::EmulatedGpuRuntime gpu;
  Roofline roofline{.device_name = "cuda-emulated"};

  ASSIGN_OR_RETURN(void* src, gpu.Malloc(options.copy_bytes));
  ASSIGN_OR_RETURN(void* dst, gpu.Malloc(options.copy_bytes));
  const std::vector<uint8_t> ones(options.copy_bytes, 1);
  RETURN_IF_ERROR(gpu.CopyHostToDevice(src, ones.data(), ones.size()));
  ASSIGN_OR_RETURN(double copy_s, BestSeconds(options.repeats, [&] {
    return gpu.CopyDeviceToDevice(dst, src, options.copy_bytes);
  }));
  roofline.copy_GBps = 2.0 * options.copy_bytes / copy_s / 1e9;
  RETURN_IF_ERROR(gpu.Free(src));
  RETURN_IF_ERROR(gpu.Free(dst));

  // The runtime's GEMM is the engine's: f32 activations [m, k] (rounded to bf16 inside), bf16
  // weights [n, k], f32 out.
  const int m = options.gemm_m, n = options.gemm_n, k = options.gemm_k;
  ASSIGN_OR_RETURN(void* in, gpu.Malloc(size_t{4} * m * k));
  ASSIGN_OR_RETURN(void* weight, gpu.Malloc(size_t{2} * n * k));
  ASSIGN_OR_RETURN(void* out, gpu.Malloc(size_t{4} * m * n));
  const std::vector<float> in_host(size_t{1} * m * k, 0.5f);
  const std::vector<uint16_t> weight_host(size_t{1} * n * k, 0x3F00);  // bf16 0.5
  RETURN_IF_ERROR(gpu.CopyHostToDevice(in, in_host.data(), in_host.size() * 4));
  RETURN_IF_ERROR(gpu.CopyHostToDevice(weight, weight_host.data(), weight_host.size() * 2));
  const kernels::MatmulParams params{.out = static_cast<float*>(out),
                                     .in = static_cast<const float*>(in),
                                     .weight = weight,
                                     .weight_dtype = DType::kBF16,
                                     .bias = nullptr,
                                     .m = m,
                                     .n = n,
                                     .k = k};
  ASSIGN_OR_RETURN(double gemm_s, BestSeconds(options.repeats, [&] { return gpu.Gemm(params); }));
  roofline.gemm_TFLOPs = 2.0 * m * n * k / gemm_s / 1e12;
  return roofline;
}

}  // namespace baton::bench
