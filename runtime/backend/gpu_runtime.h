// GpuRuntime: the thin seam between the GPU backend (gpu_backend.h, written once) and a device.
// Everything the backend asks of a GPU goes through it: device memory, the three copies, one
// Launch per kernel op, a GEMM and Synchronize. Two implementations:
//   - CudaGpuRuntime (cuda_gpu_runtime.h, built with CUDA): one device, one cudaStream_t, the
//     launchers of kernels/cuda, cuBLAS;
//   - EmulatedGpuRuntime (emulated_gpu_runtime.h, every build): device memory is host memory it
//     allocates itself, the one stream runs each call to completion in order, launches go through
//     the SIMT emulation (kernels/simt) and the GEMM through the CPU BLAS. It checks that every
//     pointer an op receives lies in one of its allocations with the op's whole extent in bounds,
//     so CI catches a host pointer or a bad size passed to a GPU without having one.
// No CUDA type appears here.
//
// Ordering: every copy and launch is enqueued on the runtime's one stream and runs in issue order.
// Errors: InvalidArgument from the params' Validate(); ResourceExhausted when the device is out
// of memory; Internal for a device error, or (emulated) a pointer that is not device memory of this
// runtime. A launch error may also surface at a later Synchronize or device-to-host copy.
//
// Not thread-safe: one thread drives a runtime (the backend's).
#pragma once

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "baton/kernels/add.h"
#include "baton/kernels/add_rms_norm.h"
#include "baton/kernels/embedding.h"
#include "baton/kernels/kv_gather.h"
#include "baton/kernels/kv_write.h"
#include "baton/kernels/logits_processors.h"
#include "baton/kernels/matmul.h"
#include "baton/kernels/paged_attention.h"
#include "baton/kernels/paged_attention_split_kv.h"
#include "baton/kernels/prefill_attention.h"
#include "baton/kernels/rms_norm.h"
#include "baton/kernels/rope.h"
#include "baton/kernels/sample.h"
#include "baton/kernels/swiglu.h"
#include "baton/kernels/token_bitmask.h"
#include "runtime/backend/device_memory.h"

namespace baton::runtime {

// A captured stream's work, instantiated (cudaGraphExec_t). Must not outlive its runtime.
class GpuGraph {
 public:
  virtual ~GpuGraph() = default;
  // Enqueues the graph on the runtime's stream (cudaGraphLaunch).
  virtual absl::Status Launch() = 0;
};

class GpuRuntime {
 public:
  virtual ~GpuRuntime() = default;

  // For messages: "cuda:0", "cuda-emulated".
  virtual absl::string_view name() const = 0;
  // The cudaStream_t everything runs on (as void*), for NCCL to enqueue on the same stream; null
  // where there is none (emulated).
  virtual void* native_stream() { return nullptr; }
  // OK if [ptr, ptr + bytes) is device memory a collective may be handed. A real device cannot
  // tell (OK); the emulated one checks that the span lies in one of its live allocations, so CI
  // catches a host pointer handed to NCCL (which a GPU would fault on or silently misread).
  virtual absl::Status CheckCollectiveBuffer(absl::string_view op, const void* ptr, size_t bytes) {
    (void)op;
    (void)ptr;
    (void)bytes;
    return absl::OkStatus();
  }
  // Streaming multiprocessors of the device, for launch heuristics
  // (kernels::PagedAttentionSplitKvNumSplits); <= 0 when unknown.
  virtual int num_sms() const = 0;

  // ---- Memory ----
  // The device's memory now (cudaMemGetInfo): what is free, of the total. Sizes the KV pool of an
  // instance whose budget is a share of its devices (ModelRanksOptions::kv_cache_bytes 0).
  virtual absl::StatusOr<DeviceMemoryInfo> MemoryInfo() = 0;
  // `bytes` > 0. The memory is uninitialized and aligned to at least 256 bytes (as cudaMalloc).
  // ResourceExhausted when the device has no room.
  virtual absl::StatusOr<void*> Malloc(size_t bytes) = 0;
  // `device` from Malloc() of this runtime, or nullptr. May wait for the stream (cudaFree does).
  virtual absl::Status Free(void* device) = 0;

  // Bookkeeping from the caching allocator above (caching_allocator.h), which hands out blocks of
  // Malloc'ed memory and keeps freed ones: the first `bytes` of the block at `device` are now in
  // use / the block is back in the cache. A real device ignores both; the emulated one narrows its
  // checks to them, so that an op reaching past a buffer's requested size, or touching a buffer
  // already freed to the cache, is caught although the block is larger and still allocated.
  virtual void NoteInUse(const void* device, size_t bytes) {
    (void)device;
    (void)bytes;
  }
  virtual void NoteCached(const void* device) { (void)device; }

  // Page-locks [host, host + bytes) of ordinary host memory (cudaHostRegister), so that copies
  // to and from it are DMA at the link's speed instead of staged through a driver buffer; until
  // UnpinHost(host). ResourceExhausted when the system will not lock that much. The emulated
  // runtime checks what a GPU would refuse: device memory, overlapping or unknown regions.
  virtual absl::Status PinHost(void* host, size_t bytes) = 0;
  virtual absl::Status UnpinHost(void* host) = 0;

  // ---- Copies, on the stream ----
  // The host source may be reused as soon as this returns.
  virtual absl::Status CopyHostToDevice(void* device, const void* host, size_t bytes) = 0;
  // Waits for the stream: returns once the bytes are on the host.
  virtual absl::Status CopyDeviceToHost(void* host, const void* device, size_t bytes) = 0;
  virtual absl::Status CopyDeviceToDevice(void* device_dst, const void* device_src,
                                          size_t bytes) = 0;
  // DeviceBackend::CopyOnDevice2D (cudaMemcpy2DAsync).
  virtual absl::Status CopyDeviceToDevice2D(void* device_dst, size_t dst_pitch,
                                            const void* device_src, size_t src_pitch,
                                            size_t width, size_t rows) = 0;
  // Waits until everything enqueued so far has run; returns the first error of it.
  virtual absl::Status Synchronize() = 0;

  // ---- Capture (cudaStreamBeginCapture in relaxed mode, so Malloc stays allowed) ----
  // While capturing, launches and device-to-device copies are recorded instead of run; host
  // copies, Synchronize, Free and graph launches are FailedPrecondition. EndCapture ends the
  // capture and instantiates what it recorded; FailedPrecondition when not capturing.
  virtual absl::Status BeginCapture() = 0;
  virtual absl::StatusOr<std::unique_ptr<GpuGraph>> EndCapture() = 0;

  // ---- Kernels, on the stream: every pointer in the params is a device pointer ----
  virtual absl::Status Launch(const kernels::EmbeddingParams& params) = 0;
  virtual absl::Status Launch(const kernels::RmsNormParams& params) = 0;
  virtual absl::Status Launch(const kernels::RopeParams& params) = 0;
  virtual absl::Status Launch(const kernels::KvWriteParams& params) = 0;
  virtual absl::Status Launch(const kernels::KvGatherParams& params) = 0;
  virtual absl::Status Launch(const kernels::PagedAttentionParams& params) = 0;
  virtual absl::Status Launch(const kernels::PrefillAttentionParams& params) = 0;
  virtual absl::Status Launch(const kernels::SwigluParams& params) = 0;
  virtual absl::Status Launch(const kernels::AddParams& params) = 0;
  virtual absl::Status Launch(const kernels::AddRmsNormParams& params) = 0;
  // Both passes of split-KV decode attention; the workspace is device memory of this runtime.
  virtual absl::Status Launch(const kernels::PagedAttentionSplitKvParams& params) = 0;
  // A row with a NaN logit gets token -1 (the launch itself succeeds).
  virtual absl::Status Launch(const kernels::SampleParams& params) = 0;
  virtual absl::Status Launch(const kernels::LogitsProcessorsParams& params) = 0;
  virtual absl::Status Launch(const kernels::TokenBitmaskParams& params) = 0;
  // out[m, n] = in[m, k] * weight[n, k]^T (+ bias[n]) with MatmulParams' semantics: weight f32,
  // bf16, f16 or int8 (with its scales), f32 accumulation; with 16-bit or int8 weights the
  // activations are rounded to bf16/f16 first (as MatmulCpu does, and as a 16-bit GEMM needs).
  virtual absl::Status Gemm(const kernels::MatmulParams& params) = 0;
};

}  // namespace baton::runtime
