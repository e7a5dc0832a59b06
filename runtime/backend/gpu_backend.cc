#include "runtime/backend/gpu_backend.h"

#include <utility>

#include "kernels/common/status_macros.h"

namespace baton::runtime {

GpuBackend::GpuBackend(DeviceKind kind, std::unique_ptr<GpuRuntime> runtime)
    : kind_(kind), runtime_(std::move(runtime)), allocator_(runtime_.get()) {}

GpuBackend::~GpuBackend() {
  // Let enqueued work finish before the allocator hands its blocks back (cudaFree would wait too,
  // but a stream-ordered free would not).
  runtime_->Synchronize().IgnoreError();
}

absl::StatusOr<void*> GpuBackend::Allocate(size_t bytes) { return allocator_.Allocate(bytes); }

void GpuBackend::Free(void* device) { allocator_.Free(device); }

absl::Status GpuBackend::CopyToDevice(void* device, const void* host, size_t bytes) {
  return runtime_->CopyHostToDevice(device, host, bytes);
}

absl::Status GpuBackend::CopyToHost(void* host, const void* device, size_t bytes) {
  return runtime_->CopyDeviceToHost(host, device, bytes);
}

absl::Status GpuBackend::CopyOnDevice(void* device_dst, const void* device_src, size_t bytes) {
  return runtime_->CopyDeviceToDevice(device_dst, device_src, bytes);
}

absl::Status GpuBackend::CopyOnDevice2D(void* device_dst, size_t dst_pitch,
                                        const void* device_src, size_t src_pitch, size_t width,
                                        size_t rows) {
  return runtime_->CopyDeviceToDevice2D(device_dst, dst_pitch, device_src, src_pitch, width, rows);
}

template <typename Params>
absl::Status GpuBackend::ValidateAndLaunch(const Params& params) {
  RETURN_IF_ERROR(kernels::Validate(params));
  return runtime_->Launch(params);
}

absl::Status GpuBackend::Embedding(const kernels::EmbeddingParams& params) {
  return ValidateAndLaunch(params);
}

absl::Status GpuBackend::RmsNorm(const kernels::RmsNormParams& params) {
  return ValidateAndLaunch(params);
}

absl::Status GpuBackend::Matmul(const kernels::MatmulParams& params) {
  RETURN_IF_ERROR(kernels::Validate(params));
  return runtime_->Gemm(params);
}

absl::Status GpuBackend::MatmulGroup(absl::Span<const kernels::MatmulParams> group) {
  // All validated before any is enqueued, so a bad member leaves every output untouched.
  for (const kernels::MatmulParams& params : group) RETURN_IF_ERROR(kernels::Validate(params));
  for (const kernels::MatmulParams& params : group) RETURN_IF_ERROR(runtime_->Gemm(params));
  return absl::OkStatus();
}

absl::Status GpuBackend::Rope(const kernels::RopeParams& params) {
  return ValidateAndLaunch(params);
}

absl::Status GpuBackend::KvWrite(const kernels::KvWriteParams& params) {
  return ValidateAndLaunch(params);
}

absl::Status GpuBackend::KvGather(const kernels::KvGatherParams& params) {
  return ValidateAndLaunch(params);
}

absl::Status GpuBackend::PagedAttentionDecode(const kernels::PagedAttentionParams& params) {
  RETURN_IF_ERROR(kernels::Validate(params));
  const int num_splits = kernels::PagedAttentionSplitKvNumSplits(params, runtime_->num_sms());
  if (num_splits <= 1) return runtime_->Launch(params);
  ASSIGN_OR_RETURN(
      void* workspace,
      allocator_.Allocate(kernels::PagedAttentionSplitKvWorkspaceBytes(params, num_splits)));
  const absl::Status status = runtime_->Launch(kernels::PagedAttentionSplitKvParams{
      .attn = params, .workspace = static_cast<float*>(workspace), .num_splits = num_splits});
  FreeWorkspace(workspace);
  return status;
}

void GpuBackend::FreeWorkspace(void* device) {
  if (capturing_) {
    capture_workspaces_.push_back(device);
    return;
  }
  // Freed before the kernels may have run: the next user of the block is enqueued after them on
  // the one stream (caching_allocator.h).
  allocator_.Free(device);
}

namespace {

// The runtime's graph and the workspaces its ops write, given back to the cache with it.
class GpuBackendGraph final : public DeviceGraph {
 public:
  GpuBackendGraph(std::unique_ptr<GpuGraph> graph, std::vector<void*> workspaces,
                  CachingAllocator* allocator)
      : graph_(std::move(graph)), workspaces_(std::move(workspaces)), allocator_(allocator) {}
  ~GpuBackendGraph() override {
    for (void* workspace : workspaces_) allocator_->Free(workspace);
  }
  absl::Status Replay() override { return graph_->Launch(); }

 private:
  std::unique_ptr<GpuGraph> graph_;
  std::vector<void*> workspaces_;
  CachingAllocator* allocator_;
};

}  // namespace

absl::Status GpuBackend::BeginCapture() {
  RETURN_IF_ERROR(runtime_->BeginCapture());
  capturing_ = true;
  capture_workspaces_.clear();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DeviceGraph>> GpuBackend::EndCapture() {
  if (!capturing_) return absl::FailedPreconditionError("EndCapture without a capture");
  capturing_ = false;
  std::vector<void*> workspaces = std::exchange(capture_workspaces_, {});
  absl::StatusOr<std::unique_ptr<GpuGraph>> graph = runtime_->EndCapture();
  if (!graph.ok()) {
    for (void* workspace : workspaces) allocator_.Free(workspace);
    return graph.status();
  }
  return std::make_unique<GpuBackendGraph>(*std::move(graph), std::move(workspaces), &allocator_);
}

absl::Status GpuBackend::PrefillAttention(const kernels::PrefillAttentionParams& params) {
  return ValidateAndLaunch(params);
}

absl::Status GpuBackend::Swiglu(const kernels::SwigluParams& params) {
  return ValidateAndLaunch(params);
}

absl::Status GpuBackend::Add(const kernels::AddParams& params) {
  return ValidateAndLaunch(params);
}

absl::Status GpuBackend::AddRmsNorm(const kernels::AddRmsNormParams& params) {
  return ValidateAndLaunch(params);
}

absl::Status GpuBackend::Sample(const kernels::SampleParams& params) {
  return ValidateAndLaunch(params);
}

absl::Status GpuBackend::LogitsProcessors(const kernels::LogitsProcessorsParams& params) {
  return ValidateAndLaunch(params);
}

absl::Status GpuBackend::TokenBitmask(const kernels::TokenBitmaskParams& params) {
  return ValidateAndLaunch(params);
}

}  // namespace baton::runtime
