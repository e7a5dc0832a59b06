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
//
// Graphs: a capture records each launch and device-to-device copy (after checking its params) and
// runs nothing; host copies, Synchronize and Free inside a capture are FailedPrecondition, as CUDA
// refuses them. A replay runs the recorded ops in order with every provenance check above, against
// the allocations live at replay: a graph that outlived a buffer it captured (a scratch buffer
// grown and freed since, a workspace returned to the cache) fails there, where a GPU would read
// whatever now lies at that address.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "kernels/common/status_macros.h"
#include "runtime/backend/gpu_runtime.h"

namespace baton::runtime {

struct GpuMemoryStats {
  size_t bytes_in_use = 0;       // Malloc'ed and not yet freed
  size_t peak_bytes_in_use = 0;  // the most bytes_in_use ever was
  int64_t num_mallocs = 0;       // successful Malloc calls so far
  int64_t num_frees = 0;         // Free calls of a non-null pointer so far
  int64_t num_launches = 0;        // kernels and GEMMs run outside graphs
  int64_t num_graph_launches = 0;  // graph replays (their ops are not counted above)
};

class EmulatedGpuRuntime final : public GpuRuntime {
 public:
  // An A100's: the launch heuristics decide as they would on one.
  static constexpr int kDefaultNumSms = 108;
  // What MemoryInfo reports as the total of an uncapped device: a stated size (not the host's), so
  // that a KV budget taken as a share of the device comes out the same on every machine.
  static constexpr size_t kUncappedTotalBytes = size_t{4} << 30;

  // `capacity_bytes` > 0 caps bytes_in_use (Malloc past it is ResourceExhausted, like a full
  // GPU); 0 means no cap beyond the host's. `num_sms` is what num_sms() reports.
  explicit EmulatedGpuRuntime(size_t capacity_bytes = 0, int num_sms = kDefaultNumSms)
      : capacity_bytes_(capacity_bytes), num_sms_(num_sms) {}
  EmulatedGpuRuntime(const EmulatedGpuRuntime&) = delete;
  EmulatedGpuRuntime& operator=(const EmulatedGpuRuntime&) = delete;
  // Frees whatever is still allocated. Aborts if host memory is still pinned: its owner must
  // unpin it first.
  ~EmulatedGpuRuntime() override;

  absl::string_view name() const override { return "cuda-emulated"; }
  int num_sms() const override { return num_sms_; }

  // The capacity (when capped, else kUncappedTotalBytes) less bytes_in_use.
  absl::StatusOr<DeviceMemoryInfo> MemoryInfo() override;
  absl::StatusOr<void*> Malloc(size_t bytes) override;
  // Internal for a pointer that is not the start of a live allocation.
  absl::Status Free(void* device) override;
  // Pre-condition (checked): `device` is the start of a live allocation, `bytes` <= its size.
  void NoteInUse(const void* device, size_t bytes) override;
  void NoteCached(const void* device) override;
  // Internal for device memory of this runtime, a region overlapping a pinned one, or (unpin) a
  // pointer that does not start a pinned region.
  absl::Status PinHost(void* host, size_t bytes) override;
  absl::Status UnpinHost(void* host) override;
  size_t pinned_host_bytes() const;
  absl::Status CopyHostToDevice(void* device, const void* host, size_t bytes) override;
  absl::Status CopyDeviceToHost(void* host, const void* device, size_t bytes) override;
  absl::Status CopyDeviceToDevice(void* device_dst, const void* device_src, size_t bytes) override;
  absl::Status CopyDeviceToDevice2D(void* device_dst, size_t dst_pitch, const void* device_src,
                                    size_t src_pitch, size_t width, size_t rows) override;
  absl::Status Synchronize() override { return CheckNotCapturing("Synchronize"); }

  absl::Status Launch(const kernels::EmbeddingParams& p) override { return Enqueue(p); }
  absl::Status Launch(const kernels::RmsNormParams& p) override { return Enqueue(p); }
  absl::Status Launch(const kernels::RopeParams& p) override { return Enqueue(p); }
  absl::Status Launch(const kernels::KvWriteParams& p) override { return Enqueue(p); }
  absl::Status Launch(const kernels::KvGatherParams& p) override { return Enqueue(p); }
  absl::Status Launch(const kernels::PagedAttentionParams& p) override { return Enqueue(p); }
  absl::Status Launch(const kernels::PrefillAttentionParams& p) override { return Enqueue(p); }
  absl::Status Launch(const kernels::SwigluParams& p) override { return Enqueue(p); }
  absl::Status Launch(const kernels::AddParams& p) override { return Enqueue(p); }
  absl::Status Launch(const kernels::AddRmsNormParams& p) override { return Enqueue(p); }
  absl::Status Launch(const kernels::PagedAttentionSplitKvParams& p) override {
    return Enqueue(p);
  }
  absl::Status Launch(const kernels::SampleParams& p) override { return Enqueue(p); }
  absl::Status Launch(const kernels::LogitsProcessorsParams& p) override { return Enqueue(p); }
  absl::Status Launch(const kernels::TokenBitmaskParams& p) override { return Enqueue(p); }
  absl::Status Gemm(const kernels::MatmulParams& p) override { return Enqueue(p); }

  absl::Status BeginCapture() override;
  absl::StatusOr<std::unique_ptr<GpuGraph>> EndCapture() override;

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

  // Outside a capture runs the op now; inside one checks its params (what a launch checks at
  // capture time) and records it, and the pointer checks run at each replay, when the memory they
  // name must be live.
  template <typename Params>
  absl::Status Enqueue(const Params& p) {
    if (!capturing_) {
      ++stats_.num_launches;
      return Run(p);
    }
    RETURN_IF_ERROR(kernels::Validate(p));
    captured_.push_back([this, p] { return Run(p); });
    return absl::OkStatus();
  }
  // The ops themselves: the checks above, then the SIMT emulation or the CPU BLAS.
  absl::Status Run(const kernels::EmbeddingParams& p);
  absl::Status Run(const kernels::RmsNormParams& p);
  absl::Status Run(const kernels::RopeParams& p);
  absl::Status Run(const kernels::KvWriteParams& p);
  absl::Status Run(const kernels::KvGatherParams& p);
  absl::Status Run(const kernels::PagedAttentionParams& p);
  absl::Status Run(const kernels::PrefillAttentionParams& p);
  absl::Status Run(const kernels::SwigluParams& p);
  absl::Status Run(const kernels::AddParams& p);
  absl::Status Run(const kernels::AddRmsNormParams& p);
  absl::Status Run(const kernels::PagedAttentionSplitKvParams& p);
  absl::Status Run(const kernels::SampleParams& p);
  absl::Status Run(const kernels::LogitsProcessorsParams& p);
  absl::Status Run(const kernels::TokenBitmaskParams& p);
  absl::Status Run(const kernels::MatmulParams& p);
  // FailedPrecondition naming `op` while capturing: CUDA refuses host synchronisation in a capture.
  absl::Status CheckNotCapturing(absl::string_view op) const;
  friend class EmulatedGpuGraph;  // replays through LaunchGraph
  absl::Status LaunchGraph(const std::vector<std::function<absl::Status()>>& ops);

  size_t capacity_bytes_;
  int num_sms_;
  bool capturing_ = false;
  std::vector<std::function<absl::Status()>> captured_;  // the current capture's ops, in order
  struct Allocation {
    size_t bytes;         // Malloc'ed
    size_t in_use_bytes;  // the extent ops and copies may touch
  };
  std::map<uintptr_t, Allocation> allocations_;  // by start address, live only
  std::map<uintptr_t, size_t> pinned_host_;      // pinned host regions: start address, bytes
  GpuMemoryStats stats_;
};

}  // namespace baton::runtime
