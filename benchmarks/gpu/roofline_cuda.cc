// MeasureCudaRoofline on a real device (CUDA builds only): cudaMemcpyAsync device to device and
// cublasGemmEx in bf16, each timed with CUDA events on one stream, best of `repeats`.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmarks/gpu/roofline.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/status_macros.h"

#define BATON_BENCH_CUBLAS_CALL(statement)                                                      \
  do {                                                                                          \
    if (const cublasStatus_t _status = (statement); _status != CUBLAS_STATUS_SUCCESS) {         \
      return absl::InternalError(                                                               \
          absl::StrCat(#statement, ": ", cublasGetStatusName(_status), " at ", __FILE__, ":",    \
                       __LINE__));                                                              \
    }                                                                                           \
  } while (false)

namespace baton::bench {
namespace {

// Everything allocated, released on every path out (errors included).
struct Resources {
  std::vector<void*> buffers;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  cublasHandle_t cublas = nullptr;
  ~Resources() {
    if (stream != nullptr) cudaStreamSynchronize(stream);
    for (void* p : buffers) cudaFree(p);
    if (cublas != nullptr) cublasDestroy(cublas);
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
  absl::StatusOr<void*> Malloc(size_t bytes) {
    void* p = nullptr;
    BATON_CUDA_CALL(cudaMalloc(&p, bytes));
    buffers.push_back(p);
    return p;
  }
};

// Fills `count` bf16 values with a fixed pattern in [-1, 1): not zeros, which would let the tensor
// cores draw less power and clock higher than on real activations.
absl::Status FillBf16(void* device, size_t count, cudaStream_t stream) {
  std::vector<uint16_t> host(count);
  uint32_t state = 12345;
  for (uint16_t& v : host) {
    state = state * 1664525u + 1013904223u;
    const float x = static_cast<float>(state >> 8) / float(1 << 24) * 2.0f - 1.0f;
    uint32_t bits;
    std::memcpy(&bits, &x, sizeof(bits));
    v = static_cast<uint16_t>(bits >> 16);
  }
  BATON_CUDA_CALL(cudaMemcpyAsync(device, host.data(), count * 2, cudaMemcpyHostToDevice, stream));
  BATON_CUDA_CALL(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

// Best (shortest) seconds of `repeats` runs of `enqueue`, after one warm-up run.
absl::StatusOr<double> BestSeconds(Resources& r, int repeats,
                                   const std::function<absl::Status()>& enqueue) {
  RETURN_IF_ERROR(enqueue());
  BATON_CUDA_CALL(cudaStreamSynchronize(r.stream));
  float best_ms = 0;
  for (int i = 0; i < repeats; ++i) {
    BATON_CUDA_CALL(cudaEventRecord(r.start, r.stream));
    RETURN_IF_ERROR(enqueue());
    BATON_CUDA_CALL(cudaEventRecord(r.stop, r.stream));
    BATON_CUDA_CALL(cudaEventSynchronize(r.stop));
    float ms = 0;
    BATON_CUDA_CALL(cudaEventElapsedTime(&ms, r.start, r.stop));
    if (i == 0 || ms < best_ms) best_ms = ms;
  }
  return best_ms / 1e3;
}

// Unavailable without a usable driver or device, InvalidArgument for an index out of range; else
// makes the device current.
absl::Status SelectDevice(int device_index) {
  int count = 0;
  if (const cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess || count == 0) {
    cudaGetLastError();
    return absl::UnavailableError(
        error != cudaSuccess
            ? absl::StrCat("cuda: no usable CUDA driver or device: ", cudaGetErrorString(error))
            : std::string("cuda: no CUDA device is visible"));
  }
  if (device_index < 0 || device_index >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda device ", device_index, " does not exist: ", count, " visible"));
  }
  BATON_CUDA_CALL(cudaSetDevice(device_index));
  return absl::OkStatus();
}

std::string CudaVersion(int v) { return absl::StrCat(v / 1000, ".", (v % 1000) / 10); }

}  // namespace

absl::StatusOr<std::string> DescribeCudaDevice(int device_index) {
  RETURN_IF_ERROR(SelectDevice(device_index));
  cudaDeviceProp props;
  BATON_CUDA_CALL(cudaGetDeviceProperties(&props, device_index));
  int driver = 0, runtime = 0, count = 0;
  BATON_CUDA_CALL(cudaDriverGetVersion(&driver));
  BATON_CUDA_CALL(cudaRuntimeGetVersion(&runtime));
  BATON_CUDA_CALL(cudaGetDeviceCount(&count));
  return absl::StrCat("cuda:", device_index, " ", props.name, " (sm_", props.major, props.minor, ", ",
                      props.totalGlobalMem >> 20, " MiB), ", count, " device(s) visible, driver CUDA ",
                      CudaVersion(driver), ", runtime ", CudaVersion(runtime));
}

absl::StatusOr<Roofline> MeasureCudaRoofline(int device_index, const RooflineOptions& options) {
  RETURN_IF_ERROR(SelectDevice(device_index));
  cudaDeviceProp props;
  BATON_CUDA_CALL(cudaGetDeviceProperties(&props, device_index));
  Roofline roofline{.device_name = props.name};

  Resources r;
  BATON_CUDA_CALL(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  BATON_CUDA_CALL(cudaEventCreate(&r.start));
  BATON_CUDA_CALL(cudaEventCreate(&r.stop));

  {
    ASSIGN_OR_RETURN(void* src, r.Malloc(options.copy_bytes));
    ASSIGN_OR_RETURN(void* dst, r.Malloc(options.copy_bytes));
    BATON_CUDA_CALL(cudaMemsetAsync(src, 1, options.copy_bytes, r.stream));
    ASSIGN_OR_RETURN(double seconds, BestSeconds(r, options.repeats, [&]() -> absl::Status {
      BATON_CUDA_CALL(cudaMemcpyAsync(dst, src, options.copy_bytes, cudaMemcpyDeviceToDevice, r.stream));
      return absl::OkStatus();
    }));
    roofline.copy_GBps = 2.0 * options.copy_bytes / seconds / 1e9;
    BATON_CUDA_CALL(cudaStreamSynchronize(r.stream));
    for (void* p : r.buffers) BATON_CUDA_CALL(cudaFree(p));
    r.buffers.clear();
  }

  const int m = options.gemm_m, n = options.gemm_n, k = options.gemm_k;
  ASSIGN_OR_RETURN(void* a, r.Malloc(size_t{2} * m * k));  // [m, k] row-major
  ASSIGN_OR_RETURN(void* b, r.Malloc(size_t{2} * k * n));  // [k, n] row-major
  ASSIGN_OR_RETURN(void* c, r.Malloc(size_t{2} * m * n));  // [m, n] row-major
  RETURN_IF_ERROR(FillBf16(a, size_t{1} * m * k, r.stream));
  RETURN_IF_ERROR(FillBf16(b, size_t{1} * k * n, r.stream));
  BATON_BENCH_CUBLAS_CALL(cublasCreate(&r.cublas));
  BATON_BENCH_CUBLAS_CALL(cublasSetStream(r.cublas, r.stream));
  const float alpha = 1, beta = 0;
  // Row-major C = A B is column-major C^T = B^T A^T: cuBLAS gets (B, A) with n and m swapped.
  ASSIGN_OR_RETURN(double seconds, BestSeconds(r, options.repeats, [&]() -> absl::Status {
    BATON_BENCH_CUBLAS_CALL(cublasGemmEx(r.cublas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b,
                                         CUDA_R_16BF, n, a, CUDA_R_16BF, k, &beta, c, CUDA_R_16BF, n,
                                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return absl::OkStatus();
  }));
  roofline.gemm_TFLOPs = 2.0 * m * n * k / seconds / 1e12;
  return roofline;
}

}  // namespace baton::bench
