#include "runtime/backend/cuda_gpu_runtime.h"

#include <algorithm>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/add.h"
#include "kernels/cuda/add_rms_norm.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/kv_gather.h"
#include "kernels/cuda/kv_write.h"
#include "kernels/cuda/logits_processors.h"
#include "kernels/cuda/matmul_fp8_gemv.h"
#include "kernels/cuda/matmul_int4_gemv.h"
#include "kernels/cuda/matmul_int8_gemv.h"
#include "kernels/cuda/token_bitmask.h"
#include "kernels/cuda/paged_attention_decode.h"
#include "kernels/cuda/paged_attention_split_kv.h"
#include "kernels/cuda/prefill_attention.h"
#include "kernels/cuda/rms_norm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/sample.h"
#include "kernels/cuda/swiglu.h"
#include "runtime/backend/cuda_gemm_helpers.h"

// cuBLAS's twin of BATON_CUDA_CALL: Internal naming the statement and the cuBLAS status.
#define BATON_CUBLAS_CALL(statement)                                                        \
  do {                                                                                      \
    if (const cublasStatus_t _baton_cublas_status = (statement);                           \
        _baton_cublas_status != CUBLAS_STATUS_SUCCESS) {                                    \
      return absl::InternalError(absl::StrCat(#statement, ": ",                             \
                                              cublasGetStatusName(_baton_cublas_status),    \
                                              " at ", __FILE__, ":", __LINE__));            \
    }                                                                                       \
  } while (false)

namespace baton::runtime {

absl::StatusOr<std::unique_ptr<CudaGpuRuntime>> CudaGpuRuntime::Create(int device_index) {
  int count = 0;
  if (const cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error, so later calls do not report it again
    return absl::UnavailableError(absl::StrCat("cuda: no usable CUDA driver or device: ",
                                               cudaGetErrorName(error), ": ",
                                               cudaGetErrorString(error)));
  }
  if (count == 0) return absl::UnavailableError("cuda: no CUDA device is visible");
  if (device_index < 0 || device_index >= count) {
    return absl::InvalidArgumentError(absl::StrCat("cuda device ", device_index,
                                                   " does not exist: ", count, " visible"));
  }
  std::unique_ptr<CudaGpuRuntime> runtime(new CudaGpuRuntime(device_index));
  RETURN_IF_ERROR(runtime->Activate());
  BATON_CUDA_CALL(
      cudaDeviceGetAttribute(&runtime->num_sms_, cudaDevAttrMultiProcessorCount, device_index));
  cudaStream_t stream = nullptr;
  BATON_CUDA_CALL(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  runtime->stream_ = stream;
  cublasHandle_t handle = nullptr;
  BATON_CUBLAS_CALL(cublasCreate(&handle));
  runtime->cublas_ = handle;
  BATON_CUBLAS_CALL(cublasSetStream(handle, stream));
  return runtime;
}

CudaGpuRuntime::CudaGpuRuntime(int device_index)
    : device_index_(device_index), name_(absl::StrCat("cuda:", device_index)) {}

CudaGpuRuntime::~CudaGpuRuntime() {
  // Errors are dropped: a destructor has no one to report them to, and the process may be on its
  // way out after a device fault.
  (void)Activate();
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  for (const Scratch* scratch : {&half_scratch_, &weight_scratch_}) {
    if (scratch->data != nullptr) cudaFree(scratch->data);
  }
  for (void* scratch : retired_scratch_) cudaFree(scratch);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::Status CudaGpuRuntime::Activate() const {
  BATON_CUDA_CALL(cudaSetDevice(device_index_));
  return absl::OkStatus();
}

absl::StatusOr<DeviceMemoryInfo> CudaGpuRuntime::MemoryInfo() {
  RETURN_IF_ERROR(Activate());
  DeviceMemoryInfo info;
  BATON_CUDA_CALL(cudaMemGetInfo(&info.free_bytes, &info.total_bytes));
  return info;
}

absl::StatusOr<void*> CudaGpuRuntime::Malloc(size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError(absl::StrCat(name_, ": Malloc of 0 bytes"));
  RETURN_IF_ERROR(Activate());
  void* ptr = nullptr;
  const cudaError_t error = cudaMalloc(&ptr, bytes);
  if (error == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // out of memory is not sticky; clear it for the next call
    return absl::ResourceExhaustedError(
        absl::StrCat(name_, ": cannot allocate ", bytes, " bytes of device memory"));
  }
  BATON_CUDA_CALL(error);
  return ptr;
}

absl::Status CudaGpuRuntime::Free(void* device) {
  if (device == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(CheckNotCapturing("Free"));
  RETURN_IF_ERROR(Activate());
  BATON_CUDA_CALL(cudaFree(device));
  return absl::OkStatus();
}

absl::Status CudaGpuRuntime::PinHost(void* host, size_t bytes) {
  RETURN_IF_ERROR(Activate());
  // Portable: pinned for every device of the process, as each rank of an instance copies its own.
  const cudaError_t error = cudaHostRegister(host, bytes, cudaHostRegisterPortable);
  if (error == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return absl::ResourceExhaustedError(absl::StrCat(
        name_, ": cannot page-lock ", bytes, " bytes of host memory: ", cudaGetErrorString(error)));
  }
  BATON_CUDA_CALL(error);
  return absl::OkStatus();
}

absl::Status CudaGpuRuntime::UnpinHost(void* host) {
  RETURN_IF_ERROR(Activate());
  BATON_CUDA_CALL(cudaHostUnregister(host));
  return absl::OkStatus();
}

absl::Status CudaGpuRuntime::CopyHostToDevice(void* device, const void* host, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckNotCapturing("CopyHostToDevice"));
  RETURN_IF_ERROR(Activate());
  BATON_CUDA_CALL(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_));
  // An async copy from pinned memory reads the host bytes later; waiting makes the host array
  // reusable at once whatever memory it is. The model uploads a step's few index arrays at the
  // start of the step, when the stream is idle, so the wait costs the copy's own time.
  BATON_CUDA_CALL(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status CudaGpuRuntime::CopyDeviceToHost(void* host, const void* device, size_t bytes) {
  RETURN_IF_ERROR(CheckNotCapturing("CopyDeviceToHost"));
  RETURN_IF_ERROR(Activate());
  if (bytes > 0) {
    BATON_CUDA_CALL(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_));
  }
  BATON_CUDA_CALL(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status CudaGpuRuntime::CopyDeviceToDevice(void* device_dst, const void* device_src,
                                                size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  RETURN_IF_ERROR(Activate());
  BATON_CUDA_CALL(
      cudaMemcpyAsync(device_dst, device_src, bytes, cudaMemcpyDeviceToDevice, stream_));
  return absl::OkStatus();
}

absl::Status CudaGpuRuntime::CopyDeviceToDevice2D(void* device_dst, size_t dst_pitch,
                                                  const void* device_src, size_t src_pitch,
                                                  size_t width, size_t rows) {
  if (width == 0 || rows == 0) return absl::OkStatus();
  RETURN_IF_ERROR(Activate());
  BATON_CUDA_CALL(cudaMemcpy2DAsync(device_dst, dst_pitch, device_src, src_pitch, width, rows,
                                    cudaMemcpyDeviceToDevice, stream_));
  return absl::OkStatus();
}

absl::Status CudaGpuRuntime::CheckNotCapturing(absl::string_view op) const {
  if (!capturing_) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      name_, ": ", op, " while capturing a graph (a capture holds device work only)"));
}

namespace {

class CudaGraph final : public GpuGraph {
 public:
  CudaGraph(int device_index, cudaStream_t stream, cudaGraphExec_t exec)
      : device_index_(device_index), stream_(stream), exec_(exec) {}
  ~CudaGraph() override {
    (void)cudaSetDevice(device_index_);
    cudaGraphExecDestroy(exec_);
  }
  absl::Status Launch() override {
    BATON_CUDA_CALL(cudaSetDevice(device_index_));
    BATON_CUDA_CALL(cudaGraphLaunch(exec_, stream_));
    return absl::OkStatus();
  }

 private:
  int device_index_;
  cudaStream_t stream_;
  cudaGraphExec_t exec_;
};

}  // namespace

absl::Status CudaGpuRuntime::BeginCapture() {
  RETURN_IF_ERROR(CheckNotCapturing("BeginCapture"));
  RETURN_IF_ERROR(Activate());
  // Relaxed: the caching allocator may still cudaMalloc a workspace mid-capture.
  BATON_CUDA_CALL(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  capturing_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GpuGraph>> CudaGpuRuntime::EndCapture() {
  if (!capturing_) {
    return absl::FailedPreconditionError(absl::StrCat(name_, ": EndCapture without a capture"));
  }
  capturing_ = false;
  RETURN_IF_ERROR(Activate());
  cudaGraph_t graph = nullptr;
  BATON_CUDA_CALL(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t error = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);  // the executable graph is a copy
  BATON_CUDA_CALL(error);
  return std::make_unique<CudaGraph>(device_index_, stream_, exec);
}

absl::Status CudaGpuRuntime::Synchronize() {
  RETURN_IF_ERROR(CheckNotCapturing("Synchronize"));
  RETURN_IF_ERROR(Activate());
  BATON_CUDA_CALL(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status CudaGpuRuntime::Launch(const kernels::EmbeddingParams& params) {
  RETURN_IF_ERROR(Activate());
  return kernels::Embedding(params, stream_);
}

absl::Status CudaGpuRuntime::Launch(const kernels::RmsNormParams& params) {
  RETURN_IF_ERROR(Activate());
  return kernels::RmsNorm(params, stream_);
}

absl::Status CudaGpuRuntime::Launch(const kernels::RopeParams& params) {
  RETURN_IF_ERROR(Activate());
  return kernels::Rope(params, stream_);
}

absl::Status CudaGpuRuntime::Launch(const kernels::KvWriteParams& params) {
  RETURN_IF_ERROR(Activate());
  return kernels::KvWrite(params, stream_);
}

absl::Status CudaGpuRuntime::Launch(const kernels::KvGatherParams& params) {
  RETURN_IF_ERROR(Activate());
  return kernels::KvGather(params, stream_);
}

absl::Status CudaGpuRuntime::Launch(const kernels::PagedAttentionParams& params) {
  RETURN_IF_ERROR(Activate());
  return kernels::PagedAttentionDecode(params, stream_);
}

absl::Status CudaGpuRuntime::Launch(const kernels::PrefillAttentionParams& params) {
  RETURN_IF_ERROR(Activate());
  return kernels::PrefillAttention(params, stream_);
}

absl::Status CudaGpuRuntime::Launch(const kernels::SwigluParams& params) {
  RETURN_IF_ERROR(Activate());
  return kernels::Swiglu(params, stream_);
}

absl::Status CudaGpuRuntime::Launch(const kernels::AddParams& params) {
  RETURN_IF_ERROR(Activate());
  return kernels::Add(params, stream_);
}

absl::Status CudaGpuRuntime::Launch(const kernels::AddRmsNormParams& params) {
  RETURN_IF_ERROR(Activate());
  return kernels::AddRmsNorm(params, stream_);
}

absl::Status CudaGpuRuntime::Launch(const kernels::PagedAttentionSplitKvParams& params) {
  RETURN_IF_ERROR(Activate());
  return kernels::PagedAttentionSplitKv(params, stream_);
}

absl::Status CudaGpuRuntime::Launch(const kernels::SampleParams& params) {
  RETURN_IF_ERROR(Activate());
  return kernels::Sample(params, stream_);
}

absl::Status CudaGpuRuntime::Launch(const kernels::LogitsProcessorsParams& params) {
  RETURN_IF_ERROR(Activate());
  return kernels::LogitsProcessors(params, stream_);
}

absl::Status CudaGpuRuntime::Launch(const kernels::TokenBitmaskParams& params) {
  RETURN_IF_ERROR(Activate());
  return kernels::TokenBitmask(params, stream_);
}

absl::Status CudaGpuRuntime::Reserve(Scratch& scratch, size_t bytes) {
  if (bytes <= scratch.bytes) return absl::OkStatus();
  // At least double, so the retired ones add up to less than the current one.
  const size_t grown = std::max(bytes, 2 * scratch.bytes);
  ASSIGN_OR_RETURN(void* data, Malloc(grown));
  if (scratch.data != nullptr) retired_scratch_.push_back(scratch.data);
  scratch.data = data;
  scratch.bytes = grown;
  return absl::OkStatus();
}

// cuBLAS multiplies neither int8 nor int4 by bf16: panels of weight rows are widened to bf16 by
// `widen` and multiplied by the activations rounded to bf16, which is MatmulCpu's semantics for
// prefill-sized quantized products. Panels bound the scratch (an lm_head of 128k rows widened
// whole would take 1 GiB). Each weight is read quantized, written and read again as bf16, which a
// prefill's many rows amortize.
absl::Status CudaGpuRuntime::GemmWidenedPanels(const kernels::MatmulParams& p, bool with_bias,
                                               absl::FunctionRef<absl::Status(int, int, uint16_t*)> widen) {
  constexpr int64_t kPanelBytes = int64_t{64} << 20;
  float beta = 0.0f;  // cuBLAS adds the product onto a seeded bias with beta 1
  if (with_bias && p.bias != nullptr) {
    RETURN_IF_ERROR(cuda_internal::BroadcastRows(p.out, p.bias, p.m, p.n, stream_));
    beta = 1.0f;
  }
  const int64_t count = int64_t{p.m} * p.k;
  RETURN_IF_ERROR(Reserve(half_scratch_, static_cast<size_t>(count) * sizeof(uint16_t)));
  uint16_t* rounded = static_cast<uint16_t*>(half_scratch_.data);
  RETURN_IF_ERROR(cuda_internal::RoundToBf16(p.in, rounded, count, stream_));
  const int panel_rows =
      static_cast<int>(std::clamp<int64_t>(kPanelBytes / (2 * int64_t{p.k}), 1, p.n));
  RETURN_IF_ERROR(
      Reserve(weight_scratch_, static_cast<size_t>(panel_rows) * p.k * sizeof(uint16_t)));
  uint16_t* panel = static_cast<uint16_t*>(weight_scratch_.data);
  const float alpha = 1.0f;
  for (int j0 = 0; j0 < p.n; j0 += panel_rows) {
    const int rows = std::min(panel_rows, p.n - j0);
    RETURN_IF_ERROR(widen(j0, rows, panel));
    // Columns [j0, j0 + rows) of out: out^T's rows from j0, leading dimension n.
    BATON_CUBLAS_CALL(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, rows, p.m, p.k, &alpha,
                                   panel, CUDA_R_16BF, p.k, rounded, CUDA_R_16BF, p.k, &beta,
                                   p.out + j0, CUDA_R_32F, p.n, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
  }
  return absl::OkStatus();
}

// Past the GEMV's rows: the integers widened exactly to bf16, then every column scaled and given
// its bias.
absl::Status CudaGpuRuntime::GemmInt8(const kernels::MatmulParams& p) {
  // Decode batches read each weight once, as a byte (matmul_int8_gemv.cuh).
  if (p.m <= kernels::kMatmulInt8GemvMaxRows) return kernels::MatmulInt8Gemv(p, stream_);
  const auto* q = static_cast<const int8_t*>(p.weight);
  // The bias comes after the scales (ScaleColumns), not seeded.
  RETURN_IF_ERROR(GemmWidenedPanels(p, /*with_bias=*/false, [&](int j0, int rows, uint16_t* panel) {
    return cuda_internal::WidenInt8ToBf16(q + int64_t{j0} * p.k, panel, int64_t{rows} * p.k,
                                          stream_);
  }));
  return cuda_internal::ScaleColumns(p.out, p.weight_scales, p.bias, p.m, p.n, stream_);
}

// Past the GEMV's rows: rows dequantized to bf16 (group scales and zero points applied), the bias
// seeded first.
absl::Status CudaGpuRuntime::GemmInt4(const kernels::MatmulParams& p) {
  // Decode batches read each weight once, as a nibble (matmul_int4_gemv.cuh).
  if (p.m <= kernels::kMatmulInt4GemvMaxRows) return kernels::MatmulInt4Gemv(p, stream_);
  const auto* packed = static_cast<const uint8_t*>(p.weight);
  const int groups = p.k / p.weight_group_size;
  return GemmWidenedPanels(p, /*with_bias=*/true, [&](int j0, int rows, uint16_t* panel) {
    return cuda_internal::DequantizeInt4ToBf16(
        packed + int64_t{j0} * (p.k / 2), p.weight_scales + int64_t{j0} * groups,
        p.weight_zeros != nullptr ? p.weight_zeros + int64_t{j0} * groups : nullptr,
        p.weight_group_size, rows, p.k, panel, stream_);
  });
}

// Past the GEMV's rows: rows dequantized to bf16 (scale times the fp8 value, rounded) into cuBLAS,
// the bias seeded first. (cuBLASLt's fp8 GEMM on sm_90 would take fp8 activations: not used.)
absl::Status CudaGpuRuntime::GemmFp8(const kernels::MatmulParams& p) {
  // Decode batches read each weight once, as a byte (matmul_fp8_gemv.cuh).
  if (p.m <= kernels::kMatmulFp8GemvMaxRows) return kernels::MatmulFp8Gemv(p, stream_);
  const auto* codes = static_cast<const uint8_t*>(p.weight);
  const int groups = p.weight_group_size > 0 ? p.k / p.weight_group_size : 1;
  return GemmWidenedPanels(p, /*with_bias=*/true, [&](int j0, int rows, uint16_t* panel) {
    return cuda_internal::DequantizeFp8ToBf16(codes + int64_t{j0} * p.k,
                                              p.weight_scales + int64_t{j0} * groups,
                                              p.weight_group_size, rows, p.k, panel, stream_);
  });
}

absl::Status CudaGpuRuntime::Gemm(const kernels::MatmulParams& p) {
  RETURN_IF_ERROR(kernels::Validate(p));
  if (p.m == 0) return absl::OkStatus();
  RETURN_IF_ERROR(Activate());
  if (p.weight_dtype == DType::kI8) return GemmInt8(p);
  if (p.weight_dtype == DType::kI4) return GemmInt4(p);
  if (p.weight_dtype == DType::kF8E4M3) return GemmFp8(p);
  // Row-major out[m, n] = in[m, k] * W[n, k]^T is, read column-major, out^T[n, m] =
  // W^T (W stored as a k x n column-major matrix, ld k, transposed) * in^T (k x m, ld k).
  const void* in = p.in;
  cudaDataType_t in_type = CUDA_R_32F;
  cudaDataType_t weight_type = CUDA_R_32F;
  if (p.weight_dtype == DType::kBF16 || p.weight_dtype == DType::kF16) {
    // cuBLAS has no bf16 x f32 (or f16 x f32) product: round the activations to the weights' dtype
    // (as MatmulCpu does) into the scratch, which holds 16-bit activations of either dtype.
    const bool bf16 = p.weight_dtype == DType::kBF16;
    const int64_t count = int64_t{p.m} * p.k;
    RETURN_IF_ERROR(Reserve(half_scratch_, static_cast<size_t>(count) * sizeof(uint16_t)));
    uint16_t* rounded = static_cast<uint16_t*>(half_scratch_.data);
    RETURN_IF_ERROR(bf16 ? cuda_internal::RoundToBf16(p.in, rounded, count, stream_)
                         : cuda_internal::RoundToF16(p.in, rounded, count, stream_));
    in = rounded;
    in_type = bf16 ? CUDA_R_16BF : CUDA_R_16F;
    weight_type = in_type;
  }
  float beta = 0.0f;
  if (p.bias != nullptr) {
    RETURN_IF_ERROR(cuda_internal::BroadcastRows(p.out, p.bias, p.m, p.n, stream_));
    beta = 1.0f;  // out = W^T in + bias
  }
  const float alpha = 1.0f;
  // CUBLAS_COMPUTE_32F: f32 accumulation (for f16 inputs too, never f16's own), and no TF32 unless
  // the handle's math mode asks for it (it does not: the default).
  BATON_CUBLAS_CALL(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, p.n, p.m, p.k, &alpha,
                                 p.weight, weight_type, p.k, in, in_type, p.k, &beta, p.out,
                                 CUDA_R_32F, p.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return absl::OkStatus();
}

}  // namespace baton::runtime
