// GpuBackend: the DeviceBackend of a GPU, written once over the GpuRuntime seam (gpu_runtime.h):
// DeviceKind::kCuda over CudaGpuRuntime (a real device), DeviceKind::kCudaEmulated over
// EmulatedGpuRuntime (host memory and the SIMT emulation, every build). Memory comes from a
// CachingAllocator over the runtime; each op validates its params (InvalidArgument, nothing
// enqueued) and launches the op's kernel; Matmul and MatmulGroup are GEMMs; the copies and ops run
// in order on the runtime's one stream and CopyToHost waits for it.
//
// PagedAttentionDecode runs the split-KV kernels (paged_attention_split_kv.h) when
// kernels::PagedAttentionSplitKvNumSplits says so for the runtime's SM count (few sequences x heads,
// long contexts), with its workspace from the caching allocator: after the first such step of a
// shape, no Malloc.
//
// Graphs: a capture is the runtime's (cudaStreamBeginCapture); the split-KV workspaces taken during
// it are not given back after their launch but held by the graph, since every replay writes them.
//
// IsHostMemory() is false even when emulated: the model must take its device path (copies in and
// out, device buffers only), which is what the emulated device is there to check.
#pragma once

#include <memory>
#include <vector>

#include "runtime/backend/caching_allocator.h"
#include "runtime/backend/device_backend.h"
#include "runtime/backend/gpu_runtime.h"

namespace baton::runtime {

class GpuBackend final : public DeviceBackend {
 public:
  // `kind` is kCuda or kCudaEmulated, as `runtime` is.
  GpuBackend(DeviceKind kind, std::unique_ptr<GpuRuntime> runtime);
  GpuBackend(const GpuBackend&) = delete;
  GpuBackend& operator=(const GpuBackend&) = delete;
  ~GpuBackend() override;

  DeviceKind device() const override { return kind_; }
  bool IsHostMemory() const override { return false; }

  absl::StatusOr<DeviceMemoryInfo> MemoryInfo() override { return runtime_->MemoryInfo(); }
  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* device) override;
  absl::Status PinHostMemory(void* host, size_t bytes) override {
    return runtime_->PinHost(host, bytes);
  }
  absl::Status UnpinHostMemory(void* host) override { return runtime_->UnpinHost(host); }
  absl::Status CopyToDevice(void* device, const void* host, size_t bytes) override;
  absl::Status CopyToHost(void* host, const void* device, size_t bytes) override;
  absl::Status CopyOnDevice(void* device_dst, const void* device_src, size_t bytes) override;
  absl::Status CopyOnDevice2D(void* device_dst, size_t dst_pitch, const void* device_src,
                              size_t src_pitch, size_t width, size_t rows) override;

  absl::Status Embedding(const kernels::EmbeddingParams& params) override;
  absl::Status RmsNorm(const kernels::RmsNormParams& params) override;
  absl::Status Matmul(const kernels::MatmulParams& params) override;
  absl::Status MatmulGroup(absl::Span<const kernels::MatmulParams> group) override;
  absl::Status Rope(const kernels::RopeParams& params) override;
  absl::Status KvWrite(const kernels::KvWriteParams& params) override;
  absl::Status KvGather(const kernels::KvGatherParams& params) override;
  absl::Status PagedAttentionDecode(const kernels::PagedAttentionParams& params) override;
  absl::Status PrefillAttention(const kernels::PrefillAttentionParams& params) override;
  absl::Status Swiglu(const kernels::SwigluParams& params) override;
  absl::Status Add(const kernels::AddParams& params) override;
  absl::Status AddRmsNorm(const kernels::AddRmsNormParams& params) override;
  absl::Status Sample(const kernels::SampleParams& params) override;
  absl::Status LogitsProcessors(const kernels::LogitsProcessorsParams& params) override;
  absl::Status TokenBitmask(const kernels::TokenBitmaskParams& params) override;

  bool SupportsGraphs() const override { return true; }
  absl::Status BeginCapture() override;
  absl::StatusOr<std::unique_ptr<DeviceGraph>> EndCapture() override;

  // Waits for everything enqueued; the first error of it.
  absl::Status Synchronize() { return runtime_->Synchronize(); }
  GpuRuntime& runtime() { return *runtime_; }
  void* native_stream() override { return runtime_->native_stream(); }
  absl::Status CheckCollectiveBuffer(absl::string_view op, const void* ptr,
                                     size_t bytes) override {
    return runtime_->CheckCollectiveBuffer(op, ptr, bytes);
  }
  CachingAllocator& allocator() { return allocator_; }

 private:
  template <typename Params>
  absl::Status ValidateAndLaunch(const Params& params);

  // A workspace an op needed for itself: back to the cache at once, or kept for the graph being
  // captured.
  void FreeWorkspace(void* device);

  DeviceKind kind_;
  std::unique_ptr<GpuRuntime> runtime_;  // before allocator_: outlives it
  CachingAllocator allocator_;
  bool capturing_ = false;
  std::vector<void*> capture_workspaces_;  // taken during the current capture
};

}  // namespace baton::runtime
