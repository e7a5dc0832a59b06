// DeviceBackend: the device one rank computes on. The forward pass (runtime/model/llama_model.cc)
// is written once against this interface; each backend implements it for one kind of device, the
// way a ggml backend does (ggml-backend-impl.h).
//
// Lifecycle: the engine creates one backend per rank (backend_registry.h) before it loads the model
// and keeps it alive as long as the model. The model allocates its scratch through the backend
// (DeviceBuffer), copies each step's index arrays in, enqueues the ops of the forward pass in
// order, and copies the logits out. Ops and copies between device buffers run in issue order (one
// stream); CopyToHost returns once the bytes are on the host, so an error of an earlier op may
// surface there.
//
// Pointers: every pointer in an op's params, and every `device` pointer below, must be valid on
// this backend's device: memory from Allocate(), or memory that the backend can address directly
// (the CPU backend's device is the host, so it takes the checkpoint's mmap and the KV pool as they
// are). Ops validate their params like the kernels do and return InvalidArgument; device failures
// are Internal. No device type (cudaStream_t, ...) appears here: a backend keeps its streams.
//
// Not thread-safe: one engine thread drives a backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "baton/kernels/add.h"
#include "baton/kernels/add_rms_norm.h"
#include "baton/kernels/embedding.h"
#include "baton/kernels/kv_gather.h"
#include "baton/kernels/kv_write.h"
#include "baton/kernels/logits_processors.h"
#include "baton/kernels/matmul.h"
#include "baton/kernels/paged_attention.h"
#include "baton/kernels/prefill_attention.h"
#include "baton/kernels/rms_norm.h"
#include "baton/kernels/rope.h"
#include "baton/kernels/sample.h"
#include "baton/kernels/swiglu.h"
#include "baton/kernels/token_bitmask.h"
#include "runtime/backend/device_memory.h"

namespace baton::runtime {

// Device work recorded once (a CUDA graph) and enqueued again as a whole: the same ops on the same
// device addresses, so each replay reads whatever those addresses hold by then. Must not outlive
// the backend that captured it.
class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  // Enqueues the recorded work on the backend's stream, after everything enqueued before.
  virtual absl::Status Replay() = 0;
};

// kCudaEmulated: the CUDA backend's code over host memory, kernels run by the SIMT emulation
// (gpu_backend.h, emulated_gpu_runtime.h); available in every build, for tests.
enum class DeviceKind { kCpu, kCuda, kCudaEmulated };

absl::string_view DeviceKindName(DeviceKind kind);

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  virtual DeviceKind device() const = 0;
  // True when device memory is host memory (the CPU backend): a host array may then be passed to
  // an op as it is, and an op may write straight into a host array, with no copy in between.
  virtual bool IsHostMemory() const = 0;
  // The device stream the backend's ops run on (a cudaStream_t as void*), so that a communicator
  // can enqueue behind them; null for backends without one (CPU, cuda-emulated).
  virtual void* native_stream() { return nullptr; }
  // OK if [ptr, ptr + bytes) may be handed to a collective of this device's communicator (NCCL
  // takes device memory only). Backends that cannot tell say OK; cuda-emulated checks.
  virtual absl::Status CheckCollectiveBuffer(absl::string_view op, const void* ptr, size_t bytes) {
    (void)op;
    (void)ptr;
    (void)bytes;
    return absl::OkStatus();
  }

  // ---- Memory ----
  // The device's free and total memory (GPUs); Unimplemented where the memory is the host's, whose
  // share the deployment states in bytes instead.
  virtual absl::StatusOr<DeviceMemoryInfo> MemoryInfo() {
    return absl::UnimplementedError("this device's memory is the host's: give its KV budget in bytes");
  }
  // `bytes` > 0. ResourceExhausted when the device has no room. The memory is uninitialized.
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  // `device` from Allocate() of this backend, or nullptr.
  virtual void Free(void* device) = 0;
  // Page-locks [host, host + bytes) of host memory that CopyToDevice / CopyToHost will use often
  // and in bulk (a swap space), so that those copies are DMA at the link's speed (cudaHostRegister);
  // until UnpinHostMemory(host). Nothing to do where device memory is the host's.
  virtual absl::Status PinHostMemory(void* host, size_t bytes) {
    (void)host;
    (void)bytes;
    return absl::OkStatus();
  }
  virtual absl::Status UnpinHostMemory(void* host) {
    (void)host;
    return absl::OkStatus();
  }
  virtual absl::Status CopyToDevice(void* device, const void* host, size_t bytes) = 0;
  virtual absl::Status CopyToHost(void* host, const void* device, size_t bytes) = 0;
  virtual absl::Status CopyOnDevice(void* device_dst, const void* device_src, size_t bytes) = 0;
  // `rows` rows of `width` bytes: row i from device_src + i * src_pitch to device_dst + i *
  // dst_pitch (cudaMemcpy2D's shape). Pitches >= width; the two regions do not overlap.
  virtual absl::Status CopyOnDevice2D(void* device_dst, size_t dst_pitch, const void* device_src,
                                      size_t src_pitch, size_t width, size_t rows) = 0;

  // ---- Ops of the forward pass: each one kernel op, with that op's params (kernels/include) ----
  virtual absl::Status Embedding(const kernels::EmbeddingParams& params) = 0;
  virtual absl::Status RmsNorm(const kernels::RmsNormParams& params) = 0;
  virtual absl::Status Matmul(const kernels::MatmulParams& params) = 0;
  // Products that share their input (Q/K/V, gate/up), each with Matmul's result.
  virtual absl::Status MatmulGroup(absl::Span<const kernels::MatmulParams> group) = 0;
  virtual absl::Status Rope(const kernels::RopeParams& params) = 0;
  virtual absl::Status KvWrite(const kernels::KvWriteParams& params) = 0;
  virtual absl::Status KvGather(const kernels::KvGatherParams& params) = 0;
  virtual absl::Status PagedAttentionDecode(const kernels::PagedAttentionParams& params) = 0;
  virtual absl::Status PrefillAttention(const kernels::PrefillAttentionParams& params) = 0;
  virtual absl::Status Swiglu(const kernels::SwigluParams& params) = 0;
  // out[i] = a[i] + b[i] for i < n; out may alias a or b.
  virtual absl::Status Add(const kernels::AddParams& params) = 0;
  // residual += in, then out = RmsNorm(residual) * weight (add_rms_norm.h); out may alias in. The
  // default is those two ops, Add then RmsNorm; the CPU and GPU backends run it as one.
  virtual absl::Status AddRmsNorm(const kernels::AddRmsNormParams& params) {
    if (absl::Status status = kernels::Validate(params); !status.ok()) return status;
    const int64_t n = int64_t{params.num_tokens} * params.hidden;
    if (absl::Status status =
            Add({.out = params.residual, .a = params.residual, .b = params.in, .n = n});
        !status.ok()) {
      return status;
    }
    return RmsNorm({.out = params.out,
                    .in = params.residual,
                    .weight = params.weight,
                    .num_tokens = params.num_tokens,
                    .hidden = params.hidden,
                    .eps = params.eps});
  }

  // ---- Graphs (CUDA graphs): launch overhead paid once per step instead of once per op ----
  // Between BeginCapture and EndCapture the ops and device-to-device copies are recorded, not run;
  // copies to or from the host are FailedPrecondition (a graph cannot hold them). Memory Allocated
  // during the capture belongs to the graph: what an op allocates for itself (a workspace) stays
  // reserved until the graph is destroyed. EndCapture ends a capture even when an op inside it
  // failed. Backends without graphs answer Unimplemented.
  virtual bool SupportsGraphs() const { return false; }
  virtual absl::Status BeginCapture() {
    return absl::UnimplementedError(
        absl::StrCat(DeviceKindName(device()), " has no graphs"));
  }
  virtual absl::StatusOr<std::unique_ptr<DeviceGraph>> EndCapture() {
    return absl::UnimplementedError(
        absl::StrCat(DeviceKindName(device()), " has no graphs"));
  }

  // ---- Sampling of the next tokens from logits on the device (sample.h) ----
  // The same token on every backend for the same logits, options, seed and draw index; a row with
  // a NaN logit gets token -1. The per-row options are validated by the caller
  // (kernels::ValidateSamplingOptions) before they are copied to the device.
  virtual absl::Status Sample(const kernels::SampleParams& params) = 0;
  // The logits processors (logit_bias, min_tokens, repetition/frequency/presence penalties) on
  // the logits before Sample, in place (logits_processors.h); the same logits on every backend.
  // The entries are validated by the caller (kernels::ValidateLogitsEntries) on the host.
  virtual absl::Status LogitsProcessors(const kernels::LogitsProcessorsParams& params) = 0;
  // Structured outputs: each listed row's tokens that its bitmask does not allow to -inf, in place,
  // after the logits processors and before Sample (token_bitmask.h); the same on every backend.
  virtual absl::Status TokenBitmask(const kernels::TokenBitmaskParams& params) = 0;
};

}  // namespace baton::runtime
