// The roofline the GPU benchmark divides its throughputs by, measured on the device it runs on:
//   - copy: the best of a few device-to-device copies of `copy_bytes`; bandwidth counts the bytes
//     read plus the bytes written (2 x copy_bytes per copy), the way a decode step's traffic is
//     counted (bytes moved through HBM), so a decode step reading B bytes at the copy's rate takes
//     B / copy_GBps;
//   - gemm: the best of a few [m, k] x [k, n] bf16 products with f32 accumulation, 2mnk FLOPs each.
// On `cuda` this is cudaMemcpyAsync and cublasGemmEx (bf16 in and out, CUBLAS_COMPUTE_32F, tensor
// cores) timed with CUDA events (roofline_cuda.cc, CUDA builds only; roofline_no_cuda.cc says
// Unimplemented otherwise). On `cuda-emulated` it is the emulated runtime's CopyDeviceToDevice and
// Gemm (a host memcpy and the CPU BLAS with bf16 weights), so the smoke run's shares are of the
// same machine's ceilings.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace baton::bench {

struct RooflineOptions {
  size_t copy_bytes = size_t{4} << 30;  // per copy (two buffers of this size are allocated)
  int gemm_m = 8192, gemm_n = 8192, gemm_k = 8192;
  int repeats = 10;  // timed copies and GEMMs each, after one warm-up; the best is kept
};

struct Roofline {
  std::string device_name;  // "NVIDIA H100 80GB HBM3", "cuda-emulated"
  double copy_GBps = 0;     // (read + written) bytes / s / 1e9
  double gemm_TFLOPs = 0;   // 2mnk / s / 1e12
};

// CUDA device `device_index`. Unavailable without a driver or device; Unimplemented in a build
// without CUDA; Internal for a CUDA or cuBLAS failure (out of memory included).
absl::StatusOr<Roofline> MeasureCudaRoofline(int device_index, const RooflineOptions& options);

// One line naming CUDA device `device_index`, its compute capability and memory, and the driver
// and runtime versions: what the bundle's run script checks before it runs anything (a driver
// older than the runtime, or no device, is this function's error message). Errors as above.
absl::StatusOr<std::string> DescribeCudaDevice(int device_index);

// The cuda-emulated device (every build).
absl::StatusOr<Roofline> MeasureEmulatedRoofline(const RooflineOptions& options);

}  // namespace baton::bench
