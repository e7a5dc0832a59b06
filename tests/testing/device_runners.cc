#include "tests/testing/device_runners.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/kv_write.h"
#include "kernels/cuda/paged_attention_decode.h"
#include "kernels/cuda/prefill_attention.h"
#include "kernels/cuda/rms_norm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/swiglu.h"

namespace baton::testing {

namespace {

// Device copies of host arrays; freed (and stream destroyed) when the session ends.
class DeviceSession {
 public:
  DeviceSession() = default;
  DeviceSession(const DeviceSession&) = delete;
  DeviceSession& operator=(const DeviceSession&) = delete;
  ~DeviceSession() {
    for (void* ptr : allocations_) cudaFree(ptr);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  absl::Status Init() {
    BATON_CUDA_CALL(cudaStreamCreate(&stream_));
    return absl::OkStatus();
  }
  cudaStream_t stream() const { return stream_; }

  // Copies `count` elements at `host` to a new device array and returns it (nullptr for null or
  // empty input).
  template <typename T>
  absl::Status Upload(const T* host, size_t count, T** device) {
    *device = nullptr;
    if (host == nullptr || count == 0) return absl::OkStatus();
    void* ptr = nullptr;
    BATON_CUDA_CALL(cudaMalloc(&ptr, count * sizeof(T)));
    allocations_.push_back(ptr);
    BATON_CUDA_CALL(cudaMemcpy(ptr, host, count * sizeof(T), cudaMemcpyHostToDevice));
    *device = static_cast<T*>(ptr);
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status Download(const T* device, size_t count, T* host) {
    if (device == nullptr || count == 0) return absl::OkStatus();
    BATON_CUDA_CALL(cudaStreamSynchronize(stream_));
    BATON_CUDA_CALL(cudaMemcpy(host, device, count * sizeof(T), cudaMemcpyDeviceToHost));
    return absl::OkStatus();
  }

 private:
  cudaStream_t stream_ = nullptr;
  std::vector<void*> allocations_;
};

// Device copies of the cache view's K and V extents (the view may start inside the host pool).
struct DeviceCache {
  kernels::PagedKvView view;
  size_t elems = 0;
};

absl::Status UploadCache(DeviceSession& session, const kernels::PagedKvView& host,
                         DeviceCache* out) {
  if (host.num_blocks <= 0) {
    return absl::InvalidArgumentError("device runner: the cache view needs num_blocks > 0");
  }
  out->view = host;
  out->elems = static_cast<size_t>(host.num_blocks - 1) * host.block_stride +
               static_cast<size_t>(host.block_size) * host.num_kv_heads * host.head_dim;
  RETURN_IF_ERROR(session.Upload(static_cast<const float*>(host.k), out->elems, &out->view.k));
  RETURN_IF_ERROR(session.Upload(static_cast<const float*>(host.v), out->elems, &out->view.v));
  return absl::OkStatus();
}

}  // namespace

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
}

absl::Status RmsNormOnDevice(const kernels::RmsNormParams& host) {
  RETURN_IF_ERROR(kernels::Validate(host));
  DeviceSession session;
  RETURN_IF_ERROR(session.Init());
  const size_t elems = static_cast<size_t>(host.num_tokens) * host.hidden;
  kernels::RmsNormParams dev = host;
  float* out = nullptr;
  float* in = nullptr;
  float* weight = nullptr;
  RETURN_IF_ERROR(session.Upload(host.in, elems, &in));
  RETURN_IF_ERROR(session.Upload(host.weight, static_cast<size_t>(host.hidden), &weight));
  if (host.out == host.in) {
    out = in;
  } else {
    RETURN_IF_ERROR(session.Upload(static_cast<const float*>(host.out), elems, &out));
  }
  dev.in = in;
  dev.out = out;
  dev.weight = weight;
  RETURN_IF_ERROR(kernels::RmsNorm(dev, session.stream()));
  return session.Download(out, elems, host.out);
}

absl::Status EmbeddingOnDevice(const kernels::EmbeddingParams& host) {
  RETURN_IF_ERROR(kernels::Validate(host));
  DeviceSession session;
  RETURN_IF_ERROR(session.Init());
  kernels::EmbeddingParams dev = host;
  const size_t table_bytes =
      static_cast<size_t>(host.vocab_size) * host.hidden * DTypeBytes(host.table_dtype);
  const size_t out_elems = static_cast<size_t>(host.num_tokens) * host.hidden;
  unsigned char* table = nullptr;
  int32_t* ids = nullptr;
  float* out = nullptr;
  RETURN_IF_ERROR(
      session.Upload(static_cast<const unsigned char*>(host.table), table_bytes, &table));
  RETURN_IF_ERROR(session.Upload(host.token_ids, static_cast<size_t>(host.num_tokens), &ids));
  RETURN_IF_ERROR(session.Upload(static_cast<const float*>(host.out), out_elems, &out));
  dev.table = table;
  dev.token_ids = ids;
  dev.out = out;
  RETURN_IF_ERROR(kernels::Embedding(dev, session.stream()));
  return session.Download(out, out_elems, host.out);
}

absl::Status RopeOnDevice(const kernels::RopeParams& host) {
  RETURN_IF_ERROR(kernels::Validate(host));
  DeviceSession session;
  RETURN_IF_ERROR(session.Init());
  kernels::RopeParams dev = host;
  const size_t q_elems = static_cast<size_t>(host.num_tokens) * host.q_stride;
  const size_t k_elems = host.num_kv_heads > 0 ? static_cast<size_t>(host.num_tokens) * host.k_stride : 0;
  RETURN_IF_ERROR(session.Upload(static_cast<const float*>(host.q), q_elems, &dev.q));
  RETURN_IF_ERROR(session.Upload(static_cast<const float*>(host.k), k_elems, &dev.k));
  int32_t* positions = nullptr;
  float* inv_freq = nullptr;
  RETURN_IF_ERROR(session.Upload(host.positions, static_cast<size_t>(host.num_tokens), &positions));
  RETURN_IF_ERROR(session.Upload(host.inv_freq, static_cast<size_t>(host.head_dim / 2), &inv_freq));
  dev.positions = positions;
  dev.inv_freq = inv_freq;
  RETURN_IF_ERROR(kernels::Rope(dev, session.stream()));
  RETURN_IF_ERROR(session.Download(dev.q, q_elems, host.q));
  return session.Download(dev.k, k_elems, host.k);
}

absl::Status KvWriteOnDevice(const kernels::KvWriteParams& host) {
  RETURN_IF_ERROR(kernels::Validate(host));
  DeviceSession session;
  RETURN_IF_ERROR(session.Init());
  kernels::KvWriteParams dev = host;
  DeviceCache cache;
  RETURN_IF_ERROR(UploadCache(session, host.cache, &cache));
  dev.cache = cache.view;
  const size_t in_elems = static_cast<size_t>(host.num_tokens) * host.kv_stride;
  float* k = nullptr;
  float* v = nullptr;
  int32_t* slots = nullptr;
  RETURN_IF_ERROR(session.Upload(host.k, in_elems, &k));
  RETURN_IF_ERROR(session.Upload(host.v, in_elems, &v));
  RETURN_IF_ERROR(session.Upload(host.slot_mapping, static_cast<size_t>(host.num_tokens), &slots));
  dev.k = k;
  dev.v = v;
  dev.slot_mapping = slots;
  RETURN_IF_ERROR(kernels::KvWrite(dev, session.stream()));
  RETURN_IF_ERROR(session.Download(dev.cache.k, cache.elems, host.cache.k));
  return session.Download(dev.cache.v, cache.elems, host.cache.v);
}

absl::Status SwigluOnDevice(const kernels::SwigluParams& host) {
  RETURN_IF_ERROR(kernels::Validate(host));
  DeviceSession session;
  RETURN_IF_ERROR(session.Init());
  kernels::SwigluParams dev = host;
  const size_t in_elems = static_cast<size_t>(host.num_tokens) * host.in_stride;
  const size_t out_elems = static_cast<size_t>(host.num_tokens) * host.out_stride;
  float* gate = nullptr;
  float* up = nullptr;
  float* out = nullptr;
  RETURN_IF_ERROR(session.Upload(host.gate, in_elems, &gate));
  RETURN_IF_ERROR(session.Upload(host.up, in_elems, &up));
  if (host.out == host.gate) {
    out = gate;
  } else if (host.out == host.up) {
    out = up;
  } else {
    RETURN_IF_ERROR(session.Upload(static_cast<const float*>(host.out), out_elems, &out));
  }
  dev.gate = gate;
  dev.up = up;
  dev.out = out;
  RETURN_IF_ERROR(kernels::Swiglu(dev, session.stream()));
  return session.Download(out, out_elems, host.out);
}

absl::Status PagedAttentionDecodeOnDevice(const kernels::PagedAttentionParams& host) {
  RETURN_IF_ERROR(kernels::Validate(host));
  DeviceSession session;
  RETURN_IF_ERROR(session.Init());
  kernels::PagedAttentionParams dev = host;
  DeviceCache cache;
  RETURN_IF_ERROR(UploadCache(session, host.cache, &cache));
  dev.cache = cache.view;
  const size_t num_seqs = static_cast<size_t>(host.num_seqs);
  const size_t out_elems = num_seqs * host.num_heads * host.cache.head_dim;
  float* q = nullptr;
  float* out = nullptr;
  int32_t* tables = nullptr;
  int32_t* lens = nullptr;
  RETURN_IF_ERROR(session.Upload(host.q, num_seqs * host.q_stride, &q));
  RETURN_IF_ERROR(session.Upload(static_cast<const float*>(host.out), out_elems, &out));
  RETURN_IF_ERROR(session.Upload(host.block_tables, num_seqs * host.max_blocks_per_seq, &tables));
  RETURN_IF_ERROR(session.Upload(host.context_lens, num_seqs, &lens));
  dev.q = q;
  dev.out = out;
  dev.block_tables = tables;
  dev.context_lens = lens;
  RETURN_IF_ERROR(kernels::PagedAttentionDecode(dev, session.stream()));
  return session.Download(out, out_elems, host.out);
}

absl::Status PrefillAttentionOnDevice(const kernels::PrefillAttentionParams& host) {
  RETURN_IF_ERROR(kernels::Validate(host));
  DeviceSession session;
  RETURN_IF_ERROR(session.Init());
  kernels::PrefillAttentionParams dev = host;
  const size_t num_seqs = static_cast<size_t>(host.num_seqs);
  const size_t num_q = static_cast<size_t>(host.q_start[num_seqs]);
  const size_t num_kv = static_cast<size_t>(host.kv_start[num_seqs]);
  const size_t out_elems = num_q * host.num_heads * host.head_dim;
  float* q = nullptr;
  float* k = nullptr;
  float* v = nullptr;
  float* out = nullptr;
  int32_t* q_start = nullptr;
  int32_t* kv_start = nullptr;
  RETURN_IF_ERROR(session.Upload(host.q, num_q * host.q_stride, &q));
  RETURN_IF_ERROR(session.Upload(host.k, num_kv * host.kv_stride, &k));
  RETURN_IF_ERROR(session.Upload(host.v, num_kv * host.kv_stride, &v));
  RETURN_IF_ERROR(session.Upload(static_cast<const float*>(host.out), out_elems, &out));
  RETURN_IF_ERROR(session.Upload(host.q_start, num_seqs + 1, &q_start));
  RETURN_IF_ERROR(session.Upload(host.kv_start, num_seqs + 1, &kv_start));
  dev.q = q;
  dev.k = k;
  dev.v = v;
  dev.out = out;
  dev.q_start = q_start;
  dev.kv_start = kv_start;
  RETURN_IF_ERROR(kernels::PrefillAttention(dev, session.stream()));
  return session.Download(out, out_elems, host.out);
}

}  // namespace baton::testing
