// CpuBackend: the DeviceBackend whose device is the host. Each op calls the op's fast CPU kernel
// (kernels::<Op>Cpu) with the backend's thread pool; memory is 64-byte-aligned host memory and the
// copies are memcpy. Ops run synchronously on the calling thread (and the pool's).
#pragma once

#include "kernels/common/thread_pool.h"
#include "runtime/backend/device_backend.h"

namespace baton::runtime {

class CpuBackend final : public DeviceBackend {
 public:
  // `pool` (may be nullptr: single-threaded) must outlive the backend.
  explicit CpuBackend(ThreadPool* pool) : pool_(pool) {}

  DeviceKind device() const override { return DeviceKind::kCpu; }
  bool IsHostMemory() const override { return true; }

  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* device) override;
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

 private:
  ThreadPool* pool_;
};

}  // namespace baton::runtime
