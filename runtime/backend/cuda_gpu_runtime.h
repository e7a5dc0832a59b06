// CudaGpuRuntime: the GpuRuntime of one real CUDA device (built only with CUDA; see gpu_runtime.h).
// One non-blocking cudaStream_t carries every copy and launch in order; memory is cudaMalloc'ed
// (the CachingAllocator above keeps it, so cudaMalloc is off the hot path); kernels are the
// launchers of kernels/cuda; Gemm is cuBLAS (cublasGemmEx, f32 compute, no TF32).
//
// Every call first makes its device current on the calling thread (cudaSetDevice), so a backend
// created on one thread may be driven from another (a rank's thread).
//
// The CUDA handles are kept as opaque pointers so that this header needs no CUDA header.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "runtime/backend/gpu_runtime.h"

struct CUstream_st;    // cudaStream_t is CUstream_st*
struct cublasContext;  // cublasHandle_t is cublasContext*

namespace baton::runtime {

class CudaGpuRuntime final : public GpuRuntime {
 public:
  // Unavailable when there is no CUDA driver or no device (cudaGetDeviceCount fails or finds
  // none); InvalidArgument for an index outside [0, device count); Internal if the stream or the
  // cuBLAS handle cannot be created.
  static absl::StatusOr<std::unique_ptr<CudaGpuRuntime>> Create(int device_index);
  CudaGpuRuntime(const CudaGpuRuntime&) = delete;
  CudaGpuRuntime& operator=(const CudaGpuRuntime&) = delete;
  // Waits for the stream, then destroys the handles. Memory still allocated is the caller's.
  ~CudaGpuRuntime() override;

  absl::string_view name() const override { return name_; }
  void* native_stream() override { return stream_; }
  int num_sms() const override { return num_sms_; }

  absl::StatusOr<DeviceMemoryInfo> MemoryInfo() override;
  absl::StatusOr<void*> Malloc(size_t bytes) override;
  absl::Status Free(void* device) override;
  // Waits for the copy: the host source may be pageable or pinned, and is reusable on return.
  absl::Status PinHost(void* host, size_t bytes) override;
  absl::Status UnpinHost(void* host) override;
  absl::Status CopyHostToDevice(void* device, const void* host, size_t bytes) override;
  absl::Status CopyDeviceToHost(void* host, const void* device, size_t bytes) override;
  absl::Status CopyDeviceToDevice(void* device_dst, const void* device_src, size_t bytes) override;
  absl::Status CopyDeviceToDevice2D(void* device_dst, size_t dst_pitch, const void* device_src,
                                    size_t src_pitch, size_t width, size_t rows) override;
  absl::Status Synchronize() override;
  absl::Status BeginCapture() override;
  absl::StatusOr<std::unique_ptr<GpuGraph>> EndCapture() override;

  absl::Status Launch(const kernels::EmbeddingParams& params) override;
  absl::Status Launch(const kernels::RmsNormParams& params) override;
  absl::Status Launch(const kernels::RopeParams& params) override;
  absl::Status Launch(const kernels::KvWriteParams& params) override;
  absl::Status Launch(const kernels::KvGatherParams& params) override;
  absl::Status Launch(const kernels::PagedAttentionParams& params) override;
  absl::Status Launch(const kernels::PrefillAttentionParams& params) override;
  absl::Status Launch(const kernels::SwigluParams& params) override;
  absl::Status Launch(const kernels::AddParams& params) override;
  absl::Status Launch(const kernels::AddRmsNormParams& params) override;
  absl::Status Launch(const kernels::PagedAttentionSplitKvParams& params) override;
  absl::Status Launch(const kernels::SampleParams& params) override;
  absl::Status Launch(const kernels::LogitsProcessorsParams& params) override;
  absl::Status Launch(const kernels::TokenBitmaskParams& params) override;
  absl::Status Gemm(const kernels::MatmulParams& params) override;

 private:
  explicit CudaGpuRuntime(int device_index);
  absl::Status Activate() const;  // cudaSetDevice(device_index_)
  // FailedPrecondition naming `op` while capturing: CUDA would invalidate the capture instead.
  absl::Status CheckNotCapturing(absl::string_view op) const;
  // A device buffer Gemm reuses from call to call.
  struct Scratch {
    void* data = nullptr;
    size_t bytes = 0;
  };
  // Grows `scratch` to at least `bytes`. The old one is retired, not freed: a captured graph may
  // still use it (and cudaFree is illegal in a capture).
  absl::Status Reserve(Scratch& scratch, size_t bytes);
  // out = the product of the activations rounded to bf16 and the weights widened to bf16 a panel
  // at a time by widen(first_row, rows, panel), plus the bias when `with_bias` (seeded into out
  // first): quantized weights in cuBLAS.
  absl::Status GemmWidenedPanels(const kernels::MatmulParams& params, bool with_bias,
                                 absl::FunctionRef<absl::Status(int, int, uint16_t*)> widen);
  // Gemm with int8 weights (MatmulParams::weight_scales).
  absl::Status GemmInt8(const kernels::MatmulParams& params);
  // Gemm with int4 weights (MatmulParams::weight_scales, weight_zeros, weight_group_size).
  absl::Status GemmInt4(const kernels::MatmulParams& params);
  // Gemm with fp8 weights (MatmulParams::weight_scales, weight_group_size).
  absl::Status GemmFp8(const kernels::MatmulParams& params);

  int device_index_;
  std::string name_;
  int num_sms_ = 0;  // cudaDevAttrMultiProcessorCount, read once by Create
  CUstream_st* stream_ = nullptr;
  bool capturing_ = false;
  cublasContext* cublas_ = nullptr;
  Scratch half_scratch_;    // [m, k] bf16 or f16 activations of the current 16-bit GEMM
  Scratch weight_scratch_;  // a panel of quantized weights widened to bf16 (GemmInt8, GemmInt4, GemmFp8)
  std::vector<void*> retired_scratch_;  // freed with the runtime
};

}  // namespace baton::runtime
