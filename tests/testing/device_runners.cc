#include "tests/testing/device_runners.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

#include "kernels/common/cuda_check.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/add.h"
#include "kernels/cuda/add_rms_norm.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/kv_gather.h"
#include "kernels/cuda/kv_write.h"
#include "kernels/cuda/logits_processors.h"
#include "kernels/cuda/matmul_fp8_gemv.h"
#include "kernels/cuda/matmul_int4_gemv.h"
#include "kernels/cuda/matmul_int8_gemv.h"
#include "kernels/cuda/paged_attention_decode.h"
#include "kernels/cuda/paged_attention_split_kv.h"
#include "kernels/cuda/prefill_attention.h"
#include "kernels/cuda/rms_norm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/sample.h"
#include "kernels/cuda/swiglu.h"
#include "kernels/cuda/token_bitmask.h"

namespace baton::testing {

namespace {

// One array a params struct points at. `set` writes the device copy's address into the pointer
// field of the device-side params (which, before that, holds the host address `host`).
struct DeviceArray {
  const void* host;
  size_t bytes;
  bool output;  // copied back to `host` after the launch (it is uploaded first all the same)
  std::function<void(void*)> set;
};
using DeviceArrays = std::vector<DeviceArray>;

template <typename T>
constexpr size_t kElemBytes = sizeof(T);
template <>
constexpr size_t kElemBytes<const void> = 1;
template <>
constexpr size_t kElemBytes<void> = 1;

// An array the kernel reads: `field` is a pointer member of the device-side params.
template <typename T>
DeviceArray In(T*& field, size_t count) {
  return {field, count * kElemBytes<T>, false, [&field](void* d) { field = static_cast<T*>(d); }};
}
// An array the kernel writes (and may read).
template <typename T>
DeviceArray Out(T*& field, size_t count) {
  return {field, count * kElemBytes<T>, true, [&field](void* d) { field = static_cast<T*>(d); }};
}

// The K and V extents of a cache view (which may start inside a larger host pool).
absl::Status AppendCache(kernels::PagedKvView& cache, bool output, DeviceArrays* arrays) {
  if (cache.num_blocks <= 0) {
    return absl::InvalidArgumentError("device runner: the cache view needs num_blocks > 0");
  }
  const size_t elems = static_cast<size_t>(cache.num_blocks - 1) * cache.block_stride +
                       static_cast<size_t>(cache.block_size) * cache.num_kv_heads * cache.head_dim;
  const size_t bytes = elems * DTypeBytes(cache.dtype);
  arrays->push_back(output ? Out(cache.k, bytes) : In(cache.k, bytes));
  arrays->push_back(output ? Out(cache.v, bytes) : In(cache.v, bytes));
  return absl::OkStatus();
}

// The upload / launch / download dance, once for every op: copies every array to the device (arrays
// with the same host address, such as an in-place output, share one device copy), points the
// params' fields at the copies, launches on a fresh stream, waits, copies the outputs back and
// frees everything.
absl::Status Run(const DeviceArrays& arrays,
                 const std::function<absl::Status(cudaStream_t)>& launch) {
  struct Allocation {
    const void* host;
    size_t bytes;
    bool output;
    void* device = nullptr;
  };
  std::vector<Allocation> allocations;
  std::vector<int> allocation_of(arrays.size(), -1);
  for (size_t i = 0; i < arrays.size(); ++i) {
    const DeviceArray& a = arrays[i];
    if (a.host == nullptr || a.bytes == 0) continue;
    auto it = std::find_if(allocations.begin(), allocations.end(),
                           [&](const Allocation& x) { return x.host == a.host; });
    if (it == allocations.end()) {
      allocations.push_back({a.host, a.bytes, a.output});
      allocation_of[i] = static_cast<int>(allocations.size()) - 1;
    } else {
      it->bytes = std::max(it->bytes, a.bytes);
      it->output |= a.output;
      allocation_of[i] = static_cast<int>(it - allocations.begin());
    }
  }
  cudaStream_t stream = nullptr;
  absl::Status status = [&]() -> absl::Status {
    BATON_CUDA_CALL(cudaStreamCreate(&stream));
    for (Allocation& x : allocations) {
      BATON_CUDA_CALL(cudaMalloc(&x.device, x.bytes));
      BATON_CUDA_CALL(cudaMemcpy(x.device, x.host, x.bytes, cudaMemcpyHostToDevice));
    }
    for (size_t i = 0; i < arrays.size(); ++i) {
      arrays[i].set(allocation_of[i] < 0 ? nullptr : allocations[allocation_of[i]].device);
    }
    RETURN_IF_ERROR(launch(stream));
    BATON_CUDA_CALL(cudaStreamSynchronize(stream));
    for (const Allocation& x : allocations) {
      if (!x.output) continue;
      BATON_CUDA_CALL(
          cudaMemcpy(const_cast<void*>(x.host), x.device, x.bytes, cudaMemcpyDeviceToHost));
    }
    return absl::OkStatus();
  }();
  for (const Allocation& x : allocations) {
    if (x.device != nullptr) cudaFree(x.device);
  }
  if (stream != nullptr) cudaStreamDestroy(stream);
  return status;
}

// Validates the host params, then runs `launch` on a device-side copy of them whose fields
// `describe` lists (and, through Run, repoints).
template <typename Params>
absl::Status RunOnDevice(const Params& host,
                         const std::function<absl::StatusOr<DeviceArrays>(Params&)>& describe,
                         absl::Status (*launch)(const Params&, cudaStream_t)) {
  RETURN_IF_ERROR(kernels::Validate(host));
  Params dev = host;
  ASSIGN_OR_RETURN(DeviceArrays arrays, describe(dev));
  return Run(arrays, [&](cudaStream_t stream) { return launch(dev, stream); });
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
  const size_t elems = static_cast<size_t>(host.num_tokens) * host.hidden;
  return RunOnDevice<kernels::RmsNormParams>(
      host,
      [&](kernels::RmsNormParams& p) -> absl::StatusOr<DeviceArrays> {
        return DeviceArrays{In(p.in, elems), In(p.weight, host.hidden), Out(p.out, elems)};
      },
      &kernels::RmsNorm);
}

absl::Status EmbeddingOnDevice(const kernels::EmbeddingParams& host) {
  const size_t table_bytes =
      static_cast<size_t>(host.vocab_size) * host.hidden * DTypeBytes(host.table_dtype);
  return RunOnDevice<kernels::EmbeddingParams>(
      host,
      [&](kernels::EmbeddingParams& p) -> absl::StatusOr<DeviceArrays> {
        return DeviceArrays{In(p.table, table_bytes), In(p.token_ids, host.num_tokens),
                            Out(p.out, static_cast<size_t>(host.num_tokens) * host.hidden)};
      },
      &kernels::Embedding);
}

absl::Status RopeOnDevice(const kernels::RopeParams& host) {
  const size_t k_rows = host.num_kv_heads > 0 ? host.num_tokens : 0;
  return RunOnDevice<kernels::RopeParams>(
      host,
      [&](kernels::RopeParams& p) -> absl::StatusOr<DeviceArrays> {
        return DeviceArrays{Out(p.q, static_cast<size_t>(host.num_tokens) * host.q_stride),
                            Out(p.k, k_rows * host.k_stride), In(p.positions, host.num_tokens),
                            In(p.inv_freq, host.head_dim / 2)};
      },
      &kernels::Rope);
}

absl::Status KvWriteOnDevice(const kernels::KvWriteParams& host) {
  const size_t in_elems = static_cast<size_t>(host.num_tokens) * host.kv_stride;
  return RunOnDevice<kernels::KvWriteParams>(
      host,
      [&](kernels::KvWriteParams& p) -> absl::StatusOr<DeviceArrays> {
        DeviceArrays arrays{In(p.k, in_elems), In(p.v, in_elems),
                            In(p.slot_mapping, host.num_tokens)};
        RETURN_IF_ERROR(AppendCache(p.cache, /*output=*/true, &arrays));
        return arrays;
      },
      &kernels::KvWrite);
}

absl::Status KvGatherOnDevice(const kernels::KvGatherParams& host) {
  const size_t num_seqs = static_cast<size_t>(host.num_seqs);
  const size_t out_elems =
      num_seqs == 0 ? 0 : static_cast<size_t>(host.out_start[num_seqs]) * host.out_stride;
  return RunOnDevice<kernels::KvGatherParams>(
      host,
      [&](kernels::KvGatherParams& p) -> absl::StatusOr<DeviceArrays> {
        DeviceArrays arrays{Out(p.k_out, out_elems), Out(p.v_out, out_elems),
                            In(p.block_tables, num_seqs * host.max_blocks_per_seq),
                            In(p.out_start, num_seqs + 1)};
        RETURN_IF_ERROR(AppendCache(p.cache, /*output=*/false, &arrays));
        return arrays;
      },
      &kernels::KvGather);
}

absl::Status AddOnDevice(const kernels::AddParams& host) {
  const size_t n = static_cast<size_t>(host.n);
  return RunOnDevice<kernels::AddParams>(
      host,
      [&](kernels::AddParams& p) -> absl::StatusOr<DeviceArrays> {
        return DeviceArrays{In(p.a, n), In(p.b, n), Out(p.out, n)};
      },
      &kernels::Add);
}

absl::Status SwigluOnDevice(const kernels::SwigluParams& host) {
  const size_t in_elems = static_cast<size_t>(host.num_tokens) * host.in_stride;
  const size_t out_elems = static_cast<size_t>(host.num_tokens) * host.out_stride;
  return RunOnDevice<kernels::SwigluParams>(
      host,
      [&](kernels::SwigluParams& p) -> absl::StatusOr<DeviceArrays> {
        return DeviceArrays{In(p.gate, in_elems), In(p.up, in_elems), Out(p.out, out_elems)};
      },
      &kernels::Swiglu);
}

absl::Status PagedAttentionDecodeOnDevice(const kernels::PagedAttentionParams& host) {
  const size_t num_seqs = static_cast<size_t>(host.num_seqs);
  return RunOnDevice<kernels::PagedAttentionParams>(
      host,
      [&](kernels::PagedAttentionParams& p) -> absl::StatusOr<DeviceArrays> {
        DeviceArrays arrays{In(p.q, num_seqs * host.q_stride),
                            Out(p.out, num_seqs * host.num_heads * host.cache.head_dim),
                            In(p.block_tables, num_seqs * host.max_blocks_per_seq),
                            In(p.context_lens, num_seqs)};
        RETURN_IF_ERROR(AppendCache(p.cache, /*output=*/false, &arrays));
        return arrays;
      },
      &kernels::PagedAttentionDecode);
}

absl::Status PrefillAttentionOnDevice(const kernels::PrefillAttentionParams& host) {
  const size_t num_seqs = static_cast<size_t>(host.num_seqs);
  // Validated by RunOnDevice before `describe` reads the (host) prefix sums.
  return RunOnDevice<kernels::PrefillAttentionParams>(
      host,
      [&](kernels::PrefillAttentionParams& p) -> absl::StatusOr<DeviceArrays> {
        const size_t num_q = static_cast<size_t>(host.q_start[num_seqs]);
        const size_t num_kv = static_cast<size_t>(host.kv_start[num_seqs]);
        return DeviceArrays{In(p.q, num_q * host.q_stride), In(p.k, num_kv * host.kv_stride),
                            In(p.v, num_kv * host.kv_stride),
                            Out(p.out, num_q * host.num_heads * host.head_dim),
                            In(p.q_start, num_seqs + 1), In(p.kv_start, num_seqs + 1)};
      },
      &kernels::PrefillAttention);
}

absl::Status AddRmsNormOnDevice(const kernels::AddRmsNormParams& host) {
  const size_t elems = static_cast<size_t>(host.num_tokens) * host.hidden;
  return RunOnDevice<kernels::AddRmsNormParams>(
      host,
      [&](kernels::AddRmsNormParams& p) -> absl::StatusOr<DeviceArrays> {
        return DeviceArrays{In(p.in, elems), In(p.weight, host.hidden), Out(p.residual, elems),
                            Out(p.out, elems)};
      },
      &kernels::AddRmsNorm);
}

absl::Status PagedAttentionSplitKvOnDevice(const kernels::PagedAttentionSplitKvParams& host) {
  const kernels::PagedAttentionParams& attn = host.attn;
  const size_t num_seqs = static_cast<size_t>(attn.num_seqs);
  return RunOnDevice<kernels::PagedAttentionSplitKvParams>(
      host,
      [&](kernels::PagedAttentionSplitKvParams& p) -> absl::StatusOr<DeviceArrays> {
        DeviceArrays arrays{
            In(p.attn.q, num_seqs * attn.q_stride),
            Out(p.attn.out, num_seqs * attn.num_heads * attn.cache.head_dim),
            In(p.attn.block_tables, num_seqs * attn.max_blocks_per_seq),
            In(p.attn.context_lens, num_seqs),
            Out(p.workspace,
                kernels::PagedAttentionSplitKvWorkspaceBytes(attn, host.num_splits) / sizeof(float))};
        RETURN_IF_ERROR(AppendCache(p.attn.cache, /*output=*/false, &arrays));
        return arrays;
      },
      &kernels::PagedAttentionSplitKv);
}

absl::Status SampleOnDevice(const kernels::SampleParams& host) {
  const size_t num_seqs = static_cast<size_t>(host.num_seqs);
  return RunOnDevice<kernels::SampleParams>(
      host,
      [&](kernels::SampleParams& p) -> absl::StatusOr<DeviceArrays> {
        DeviceArrays arrays{In(p.logits, num_seqs * host.vocab_size), In(p.temperature, num_seqs),
                            In(p.top_k, num_seqs), In(p.top_p, num_seqs), In(p.seed, num_seqs),
                            In(p.draw_idx, num_seqs), Out(p.token_ids, num_seqs),
                            Out(p.logprobs, num_seqs)};
        if (host.min_p != nullptr) arrays.push_back(In(p.min_p, num_seqs));
        return arrays;
      },
      &kernels::Sample);
}

absl::Status LogitsProcessorsOnDevice(const kernels::LogitsProcessorsParams& host) {
  const size_t num_seqs = static_cast<size_t>(host.num_seqs);
  const size_t num_entries = num_seqs == 0 ? 0 : static_cast<size_t>(host.entry_offsets[num_seqs]);
  return RunOnDevice<kernels::LogitsProcessorsParams>(
      host,
      [&](kernels::LogitsProcessorsParams& p) -> absl::StatusOr<DeviceArrays> {
        DeviceArrays arrays{Out(p.logits, num_seqs * host.vocab_size),
                            In(p.entry_offsets, num_seqs + 1), In(p.repetition_penalty, num_seqs),
                            In(p.frequency_penalty, num_seqs), In(p.presence_penalty, num_seqs),
                            In(p.num_generated, num_seqs), In(p.min_tokens, num_seqs)};
        if (num_entries > 0) arrays.push_back(In(p.entries, num_entries));
        return arrays;
      },
      &kernels::LogitsProcessors);
}

absl::Status TokenBitmaskOnDevice(const kernels::TokenBitmaskParams& host) {
  const size_t num_masked = static_cast<size_t>(std::max(host.num_masked, 0));
  size_t num_rows = 0;
  for (size_t m = 0; m < num_masked; ++m) num_rows = std::max(num_rows, static_cast<size_t>(host.rows[m]) + 1);
  return RunOnDevice<kernels::TokenBitmaskParams>(
      host,
      [&](kernels::TokenBitmaskParams& p) -> absl::StatusOr<DeviceArrays> {
        return DeviceArrays{Out(p.logits, num_rows * host.vocab_size),
                            In(p.bitmask, num_masked * host.bitmask_words), In(p.rows, num_masked)};
      },
      &kernels::TokenBitmask);
}

absl::Status MatmulInt8GemvOnDevice(const kernels::MatmulParams& host) {
  const size_t m = static_cast<size_t>(std::max(host.m, 0));
  const size_t n = static_cast<size_t>(host.n);
  const size_t k = static_cast<size_t>(host.k);
  return RunOnDevice<kernels::MatmulParams>(
      host,
      [&](kernels::MatmulParams& p) -> absl::StatusOr<DeviceArrays> {
        DeviceArrays arrays{Out(p.out, m * n), In(p.in, m * k), In(p.weight, n * k),
                            In(p.weight_scales, n)};
        if (host.bias != nullptr) arrays.push_back(In(p.bias, n));
        return arrays;
      },
      &kernels::MatmulInt8Gemv);
}

absl::Status MatmulInt4GemvOnDevice(const kernels::MatmulParams& host) {
  const size_t m = static_cast<size_t>(std::max(host.m, 0));
  const size_t n = static_cast<size_t>(host.n);
  const size_t k = static_cast<size_t>(host.k);
  const size_t groups = host.weight_group_size > 0 ? n * (k / host.weight_group_size) : 0;
  return RunOnDevice<kernels::MatmulParams>(
      host,
      [&](kernels::MatmulParams& p) -> absl::StatusOr<DeviceArrays> {
        DeviceArrays arrays{Out(p.out, m * n), In(p.in, m * k),
                            In(p.weight, n * k / 2),  // two weights a byte
                            In(p.weight_scales, groups)};
        if (host.weight_zeros != nullptr) arrays.push_back(In(p.weight_zeros, groups));
        if (host.bias != nullptr) arrays.push_back(In(p.bias, n));
        return arrays;
      },
      &kernels::MatmulInt4Gemv);
}

absl::Status MatmulFp8GemvOnDevice(const kernels::MatmulParams& host) {
  const size_t m = static_cast<size_t>(std::max(host.m, 0));
  const size_t n = static_cast<size_t>(host.n);
  const size_t k = static_cast<size_t>(host.k);
  const size_t scales = host.weight_group_size > 0 ? n * (k / host.weight_group_size) : n;
  return RunOnDevice<kernels::MatmulParams>(
      host,
      [&](kernels::MatmulParams& p) -> absl::StatusOr<DeviceArrays> {
        DeviceArrays arrays{Out(p.out, m * n), In(p.in, m * k), In(p.weight, n * k),
                            In(p.weight_scales, scales)};
        if (host.bias != nullptr) arrays.push_back(In(p.bias, n));
        return arrays;
      },
      &kernels::MatmulFp8Gemv);
}

}  // namespace baton::testing
