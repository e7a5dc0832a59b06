#include "runtime/backend/cpu_backend.h"

#include <cstddef>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "baton/kernels/add.h"
#include "baton/kernels/add_rms_norm.h"

namespace baton::runtime {

namespace {

constexpr std::align_val_t kAlignment{64};  // one cache line, and an AVX-512 register

}  // namespace

absl::StatusOr<void*> CpuBackend::Allocate(size_t bytes) {
  void* ptr = ::operator new(bytes, kAlignment, std::nothrow);
  if (ptr == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cpu backend: cannot allocate ", bytes,
                                                     " bytes"));
  }
  return ptr;
}

void CpuBackend::Free(void* device) { ::operator delete(device, kAlignment); }

absl::Status CpuBackend::CopyToDevice(void* device, const void* host, size_t bytes) {
  std::memcpy(device, host, bytes);
  return absl::OkStatus();
}

absl::Status CpuBackend::CopyToHost(void* host, const void* device, size_t bytes) {
  std::memcpy(host, device, bytes);
  return absl::OkStatus();
}

absl::Status CpuBackend::CopyOnDevice(void* device_dst, const void* device_src, size_t bytes) {
  std::memcpy(device_dst, device_src, bytes);
  return absl::OkStatus();
}

absl::Status CpuBackend::CopyOnDevice2D(void* device_dst, size_t dst_pitch,
                                        const void* device_src, size_t src_pitch, size_t width,
                                        size_t rows) {
  auto* dst = static_cast<std::byte*>(device_dst);
  const auto* src = static_cast<const std::byte*>(device_src);
  for (size_t i = 0; i < rows; ++i) std::memcpy(dst + i * dst_pitch, src + i * src_pitch, width);
  return absl::OkStatus();
}

absl::Status CpuBackend::Embedding(const kernels::EmbeddingParams& params) {
  return kernels::EmbeddingCpu(params, pool_);
}

absl::Status CpuBackend::RmsNorm(const kernels::RmsNormParams& params) {
  return kernels::RmsNormCpu(params, pool_);
}

absl::Status CpuBackend::Matmul(const kernels::MatmulParams& params) {
  return kernels::MatmulCpu(params, pool_);
}

absl::Status CpuBackend::MatmulGroup(absl::Span<const kernels::MatmulParams> group) {
  return kernels::MatmulGroupCpu(group, pool_);
}

absl::Status CpuBackend::Rope(const kernels::RopeParams& params) {
  return kernels::RopeCpu(params, pool_);
}

absl::Status CpuBackend::KvWrite(const kernels::KvWriteParams& params) {
  return kernels::KvWriteCpu(params, pool_);
}

absl::Status CpuBackend::KvGather(const kernels::KvGatherParams& params) {
  return kernels::KvGatherCpu(params, pool_);
}

absl::Status CpuBackend::PagedAttentionDecode(const kernels::PagedAttentionParams& params) {
  return kernels::PagedAttentionDecodeCpu(params, pool_);
}

absl::Status CpuBackend::PrefillAttention(const kernels::PrefillAttentionParams& params) {
  return kernels::PrefillAttentionCpu(params, pool_);
}

absl::Status CpuBackend::Swiglu(const kernels::SwigluParams& params) {
  return kernels::SwigluCpu(params, pool_);
}

absl::Status CpuBackend::Add(const kernels::AddParams& params) {
  return kernels::AddCpu(params, pool_);
}

absl::Status CpuBackend::AddRmsNorm(const kernels::AddRmsNormParams& params) {
  return kernels::AddRmsNormCpu(params, pool_);
}

absl::Status CpuBackend::Sample(const kernels::SampleParams& params) {
  return kernels::SampleCpu(params);
}

absl::Status CpuBackend::LogitsProcessors(const kernels::LogitsProcessorsParams& params) {
  return kernels::LogitsProcessorsCpu(params);
}

absl::Status CpuBackend::TokenBitmask(const kernels::TokenBitmaskParams& params) {
  return kernels::TokenBitmaskCpu(params);
}

}  // namespace baton::runtime
