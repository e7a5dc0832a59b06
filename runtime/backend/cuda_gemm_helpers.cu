#include "runtime/backend/cuda_gemm_helpers.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

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

// One thread per byte: its two columns, b and b + 16 of a 32-column block.
__global__ void DequantizeInt4ToBf16Kernel(const uint8_t* packed, const float* scales,
                                           const float* zeros, int group_size, int k,
                                           int64_t num_bytes, uint16_t* out) {
  const int64_t row_bytes = k / 2;
  const int groups = k / group_size;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < num_bytes;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / row_bytes;
    const int64_t o = i % row_bytes;
    for (int half = 0; half < 2; ++half) {
      const int64_t c = o / 16 * 32 + o % 16 + 16 * half;
      const int64_t g = r * groups + c / group_size;
      const int u = half == 0 ? (packed[i] & 0xF) : (packed[i] >> 4);
      const float zero = zeros != nullptr ? zeros[g] : 8.0f;
      out[r * k + c] = __bfloat16_as_ushort(__float2bfloat16_rn(scales[g] * (u - zero)));
    }
  }
}

// One thread per weight.
__global__ void DequantizeFp8ToBf16Kernel(const uint8_t* codes, const float* scales, int group_size,
                                          int k, int64_t n, uint16_t* out) {
  const int groups = group_size > 0 ? k / group_size : 1;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / k;
    const int64_t c = i % k;
    const float scale = scales[r * groups + (group_size > 0 ? c / group_size : 0)];
    __nv_fp8_e4m3 code;
    code.__x = codes[i];
    out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(scale * static_cast<float>(code)));
  }
}

}  // namespace

absl::Status DequantizeFp8ToBf16(const uint8_t* codes, const float* scales, int group_size, int rows,
                                 int k, uint16_t* out, cudaStream_t stream) {
  const int64_t n = int64_t{rows} * k;
  if (n <= 0) return absl::OkStatus();
  DequantizeFp8ToBf16Kernel<<<NumBlocks(n), kThreads, 0, stream>>>(codes, scales, group_size, k, n,
                                                                   out);
  BATON_CUDA_CALL(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status DequantizeInt4ToBf16(const uint8_t* packed, const float* scales, const float* zeros,
                                  int group_size, int rows, int k, uint16_t* out,
                                  cudaStream_t stream) {
  const int64_t num_bytes = int64_t{rows} * (k / 2);
  if (num_bytes <= 0) return absl::OkStatus();
  DequantizeInt4ToBf16Kernel<<<NumBlocks(num_bytes), kThreads, 0, stream>>>(
      packed, scales, zeros, group_size, k, num_bytes, out);
  BATON_CUDA_CALL(cudaGetLastError());
  return absl::OkStatus();
}

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
