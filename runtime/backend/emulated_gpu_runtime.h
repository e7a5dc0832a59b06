// EmulatedGpuRuntime: the GpuRuntime of the `cuda-emulated` device, built in every build so that CI,
// which has no GPU, runs the GPU backend's own code (gpu_backend.h): its allocation sizes, its
// pointer arithmetic on device buffers and its launch parameters.
//
// "Device" memory is host memory that this runtime allocated; the one stream runs each call to
// completion, in order; a launch runs the CUDA kernel body through the SIMT emulation
// (kernels/simt/emulated_kernels.h) and the GEMM through the CPU BLAS (kernels::MatmulCpu).
//
// Provenance: before each op, every array its params point at, with the extent the op will touch
// (from the params' shapes; for the ragged and paged ops also from the prefix sums, lengths, slots
// and block ids they hold, which this runtime can read), must lie inside one live allocation of this
// runtime; likewise the device side of every copy, and the host side of a copy must not be device
// memory. Otherwise Internal, naming the op, the field, the bytes needed and the allocation. That is
// what catches a forward pass handing a GPU a host pointer (the checkpoint mmap, a host array).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>

#include "runtime/backend/gpu_runtime.h"

namespace baton::runtime {

struct GpuMemoryStats {
  size_t bytes_in_use = 0;       // Malloc'ed and not yet freed
  size_t peak_bytes_in_use = 0;  // the most bytes_in_use ever was
  int64_t num_mallocs = 0;       // successful Malloc calls so far
  int64_t num_frees = 0;         // Free calls of a non-null pointer so far
};

class EmulatedGpuRuntime final : public GpuRuntime {
 public:
  // An A100's: the launch heuristics decide as they would on one.
  static constexpr int kDefaultNumSms = 108;

  // `capacity_bytes` > 0 caps bytes_in_use (Malloc past it is ResourceExhausted, like a full
  // GPU); 0 means no cap beyond the host's. `num_sms` is what num_sms() reports.
  explicit EmulatedGpuRuntime(size_t capacity_bytes = 0, int num_sms = kDefaultNumSms)
      : capacity_bytes_(capacity_bytes), num_sms_(num_sms) {}
  EmulatedGpuRuntime(const EmulatedGpuRuntime&) = delete;
  EmulatedGpuRuntime& operator=(const EmulatedGpuRuntime&) = delete;
  // Frees whatever is still allocated.
  ~EmulatedGpuRuntime() override;

  absl::string_view name() const override { return "cuda-emulated"; }
  int num_sms() const override { return num_sms_; }

  absl::StatusOr<void*> Malloc(size_t bytes) override;
  // Internal for a pointer that is not the start of a live allocation.
  absl::Status Free(void* device) override;
  // Pre-condition (checked): `device` is the start of a live allocation, `bytes` <= its size.
  void NoteInUse(const void* device, size_t bytes) override;
  void NoteCached(const void* device) override;
  absl::Status CopyHostToDevice(void* device, const void* host, size_t bytes) override;
  absl::Status CopyDeviceToHost(void* host, const void* device, size_t bytes) override;
  absl::Status CopyDeviceToDevice(void* device_dst, const void* device_src, size_t bytes) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }

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
  absl::Status Gemm(const kernels::MatmulParams& params) override;

  const GpuMemoryStats& stats() const { return stats_; }

  absl::Status CheckCollectiveBuffer(absl::string_view op, const void* ptr,
                                     size_t bytes) override {
    return CheckDevice(op, "buffer", ptr, bytes);
  }

  // OK when [ptr, ptr + bytes) lies inside the in-use part of one live allocation (all of it after
  // Malloc, what NoteInUse says after that; nothing after NoteCached); bytes == 0 always passes;
  // otherwise Internal "<name>: <op>: <field> ...". Public for the tests.
  absl::Status CheckDevice(absl::string_view op, absl::string_view field, const void* ptr,
                           size_t bytes) const;

 private:
  // The cache view's K and V over `num_blocks` blocks (num_blocks <= 0 passes).
  absl::Status CheckCache(absl::string_view op, const kernels::PagedKvView& cache,
                          int64_t num_blocks) const;
  // The arrays of decode attention (both forms), over the extents the tables say are read.
  absl::Status CheckPagedAttention(absl::string_view op,
                                   const kernels::PagedAttentionParams& p) const;
  // Internal when a host array of a copy is device memory of this runtime.
  absl::Status CheckHost(absl::string_view op, const void* ptr, size_t bytes) const;

  size_t capacity_bytes_;
  int num_sms_;
  struct Allocation {
    size_t bytes;         // Malloc'ed
    size_t in_use_bytes;  // the extent ops and copies may touch
  };
  std::map<uintptr_t, Allocation> allocations_;  // by start address, live only
  GpuMemoryStats stats_;
};

}  // namespace baton::runtime
