#include "runtime/backend/cuda_gemm_helpers.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/common/cuda_check.h"

namespace baton::runtime::cuda_internal {

namespace {

constexpr int kThreads = 256;
// Grid-stride loops with at most this many blocks: enough to fill an H100, and far from gridDim.x's
// limit whatever n is.
constexpr int64_t kMaxBlocks = 4096;

unsigned NumBlocks(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
}

__global__ void RoundToBf16Kernel(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(in[i]));
  }
}

__global__ void RoundToF16Kernel(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = __half_as_ushort(__float2half_rn(in[i]));
  }
}

__global__ void BroadcastRowsKernel(float* out, const float* bias, int64_t total, int n) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = bias[i % n];
  }
}

__global__ void WidenInt8ToBf16Kernel(const int8_t* q, uint16_t* out, int64_t n) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(static_cast<float>(q[i])));
  }
}

__global__ void ScaleColumnsKernel(float* out, const float* scales, const float* bias,
                                   int64_t total, int n) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int c = static_cast<int>(i % n);
    out[i] = out[i] * scales[c] + (bias != nullptr ? bias[c] : 0.0f);
  }
}

}  // namespace

absl::Status WidenInt8ToBf16(const int8_t* q, uint16_t* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  WidenInt8ToBf16Kernel<<<NumBlocks(n), kThreads, 0, stream>>>(q, out, n);
  BATON_CUDA_CALL(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status ScaleColumns(float* out, const float* scales, const float* bias, int m, int n,
                          cudaStream_t stream) {
  const int64_t total = int64_t{m} * n;
  if (total <= 0) return absl::OkStatus();
  ScaleColumnsKernel<<<NumBlocks(total), kThreads, 0, stream>>>(out, scales, bias, total, n);
  BATON_CUDA_CALL(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status RoundToBf16(const float* in, uint16_t* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  RoundToBf16Kernel<<<NumBlocks(n), kThreads, 0, stream>>>(in, out, n);
  BATON_CUDA_CALL(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status RoundToF16(const float* in, uint16_t* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  RoundToF16Kernel<<<NumBlocks(n), kThreads, 0, stream>>>(in, out, n);
  BATON_CUDA_CALL(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status BroadcastRows(float* out, const float* bias, int m, int n, cudaStream_t stream) {
  const int64_t total = int64_t{m} * n;
  if (total <= 0) return absl::OkStatus();
  BroadcastRowsKernel<<<NumBlocks(total), kThreads, 0, stream>>>(out, bias, total, n);
  BATON_CUDA_CALL(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace baton::runtime::cuda_internal
