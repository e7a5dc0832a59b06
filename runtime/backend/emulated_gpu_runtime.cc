#include "runtime/backend/emulated_gpu_runtime.h"

#include <cstddef>
#include <algorithm>
#include <cstring>
#include <functional>
#include <iterator>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/common/check.h"
#include "kernels/common/status_macros.h"
#include "kernels/simt/emulated_kernels.h"

namespace baton::runtime {

namespace {

// cudaMalloc's alignment, so that an emulated buffer is no better aligned than a real one.
constexpr std::align_val_t kAlignment{256};

// Bytes of `rows` rows `stride` elements apart of which the first `used` are touched: the last
// row's tail past `used` is not part of the extent (a strided view may end right after it).
template <typename T>
size_t RowsBytes(int64_t rows, int64_t stride, int64_t used) {
  if (rows <= 0 || used <= 0) return 0;
  return static_cast<size_t>((rows - 1) * stride + used) * sizeof(T);
}

template <typename T>
size_t Bytes(int64_t count) {
  return count <= 0 ? 0 : static_cast<size_t>(count) * sizeof(T);
}

// Blocks a sequence of `len` tokens reads from its block table, capped at the table's width.
int64_t BlocksOf(int64_t len, int block_size, int max_blocks_per_seq) {
  if (len <= 0) return 0;
  return std::min<int64_t>((len + block_size - 1) / block_size, max_blocks_per_seq);
}

// The highest block id the first `num_used[s]` entries of each row of `block_tables` name, plus
// one; Internal for a negative id (the kernel would read before the pool).
absl::StatusOr<int64_t> BlocksNeeded(absl::string_view name, absl::string_view op,
                                     const int32_t* block_tables, int num_seqs,
                                     int max_blocks_per_seq,
                                     const std::function<int64_t(int)>& num_used) {
  int64_t needed = 0;
  for (int s = 0; s < num_seqs; ++s) {
    const int64_t used = num_used(s);
    for (int64_t j = 0; j < used; ++j) {
      const int32_t block_id = block_tables[int64_t{s} * max_blocks_per_seq + j];
      if (block_id < 0) {
        return absl::InternalError(absl::StrCat(name, ": ", op, ": block_tables[", s, "][", j,
                                                "] = ", block_id, " is negative"));
      }
      needed = std::max<int64_t>(needed, int64_t{block_id} + 1);
    }
  }
  return needed;
}

}  // namespace

EmulatedGpuRuntime::~EmulatedGpuRuntime() {
  // Whoever pinned host memory unpins it while the device is alive (a GPU would keep it locked).
  BATON_CHECK(pinned_host_.empty());
  for (const auto& [start, allocation] : allocations_) {
    ::operator delete(reinterpret_cast<void*>(start), kAlignment);
  }
}

absl::StatusOr<DeviceMemoryInfo> EmulatedGpuRuntime::MemoryInfo() {
  const size_t total = capacity_bytes_ > 0 ? capacity_bytes_ : kUncappedTotalBytes;
  return DeviceMemoryInfo{.free_bytes = total - std::min(total, stats_.bytes_in_use),
                          .total_bytes = total};
}

absl::StatusOr<void*> EmulatedGpuRuntime::Malloc(size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError(absl::StrCat(name(), ": Malloc of 0 bytes"));
  if (capacity_bytes_ > 0 && bytes > capacity_bytes_ - std::min(capacity_bytes_,
                                                                stats_.bytes_in_use)) {
    return absl::ResourceExhaustedError(
        absl::StrCat(name(), ": cannot allocate ", bytes, " bytes: ", stats_.bytes_in_use,
                     " of ", capacity_bytes_, " in use"));
  }
  void* ptr = ::operator new(bytes, kAlignment, std::nothrow);
  if (ptr == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat(name(), ": cannot allocate ", bytes, " bytes of host memory"));
  }
  allocations_.emplace(reinterpret_cast<uintptr_t>(ptr), Allocation{bytes, bytes});
  stats_.bytes_in_use += bytes;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  ++stats_.num_mallocs;
  return ptr;
}

absl::Status EmulatedGpuRuntime::Free(void* device) {
  if (device == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(CheckNotCapturing("Free"));
  auto it = allocations_.find(reinterpret_cast<uintptr_t>(device));
  if (it == allocations_.end()) {
    return absl::InternalError(absl::StrFormat(
        "%s: Free of %p, which is not the start of a live allocation", name(), device));
  }
  stats_.bytes_in_use -= it->second.bytes;
  ++stats_.num_frees;
  allocations_.erase(it);
  ::operator delete(device, kAlignment);
  return absl::OkStatus();
}

void EmulatedGpuRuntime::NoteInUse(const void* device, size_t bytes) {
  auto it = allocations_.find(reinterpret_cast<uintptr_t>(device));
  BATON_CHECK(it != allocations_.end() && bytes <= it->second.bytes);
  it->second.in_use_bytes = bytes;
}

void EmulatedGpuRuntime::NoteCached(const void* device) {
  auto it = allocations_.find(reinterpret_cast<uintptr_t>(device));
  BATON_CHECK(it != allocations_.end());
  it->second.in_use_bytes = 0;
}

absl::Status EmulatedGpuRuntime::CheckDevice(absl::string_view op, absl::string_view field,
                                             const void* ptr, size_t bytes) const {
  if (bytes == 0) return absl::OkStatus();
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  auto it = allocations_.upper_bound(address);
  if (it == allocations_.begin() || address >= std::prev(it)->first + std::prev(it)->second.bytes) {
    return absl::InternalError(absl::StrFormat(
        "%s: %s: %s = %p (%d bytes) is not device memory of this runtime (a host pointer, or "
        "freed)",
        name(), op, field, ptr, bytes));
  }
  --it;
  const size_t offset = address - it->first;
  const size_t in_use = it->second.in_use_bytes;
  if (in_use == 0) {
    return absl::InternalError(absl::StrFormat(
        "%s: %s: %s = %p (%d bytes) is in a buffer already freed (to the allocator's cache)",
        name(), op, field, ptr, bytes));
  }
  if (offset > in_use || bytes > in_use - offset) {
    return absl::InternalError(absl::StrFormat(
        "%s: %s: %s needs %d bytes at offset %d of an allocation of %d bytes (%d past its end)",
        name(), op, field, bytes, offset, in_use, offset + bytes - in_use));
  }
  return absl::OkStatus();
}

absl::Status EmulatedGpuRuntime::CheckHost(absl::string_view op, const void* ptr,
                                           size_t bytes) const {
  if (bytes == 0) return absl::OkStatus();
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  auto it = allocations_.upper_bound(address + bytes - 1);
  if (it != allocations_.begin()) {
    --it;
    if (it->first + it->second.bytes > address) {
      return absl::InternalError(absl::StrFormat(
          "%s: %s: host = %p (%d bytes) is device memory of this runtime", name(), op, ptr,
          bytes));
    }
  }
  return absl::OkStatus();
}

absl::Status EmulatedGpuRuntime::CheckCache(absl::string_view op, const kernels::PagedKvView& cache,
                                            int64_t num_blocks) const {
  if (num_blocks <= 0) return absl::OkStatus();
  const int64_t block_elems = int64_t{cache.block_size} * cache.num_kv_heads * cache.head_dim;
  const size_t elems = RowsBytes<char>(num_blocks, cache.block_stride, block_elems);
  const size_t bytes = elems * DTypeBytes(cache.dtype);
  RETURN_IF_ERROR(CheckDevice(op, "cache.k", cache.k, bytes));
  return CheckDevice(op, "cache.v", cache.v, bytes);
}

absl::Status EmulatedGpuRuntime::CheckNotCapturing(absl::string_view op) const {
  if (!capturing_) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      name(), ": ", op, " while capturing a graph (a capture holds device work only)"));
}

// The recorded ops of one capture; each replay runs them all, in order.
class EmulatedGpuGraph final : public GpuGraph {
 public:
  EmulatedGpuGraph(EmulatedGpuRuntime* runtime, std::vector<std::function<absl::Status()>> ops)
      : runtime_(runtime), ops_(std::move(ops)) {}
  absl::Status Launch() override { return runtime_->LaunchGraph(ops_); }

 private:
  EmulatedGpuRuntime* runtime_;
  std::vector<std::function<absl::Status()>> ops_;
};

absl::Status EmulatedGpuRuntime::BeginCapture() {
  if (capturing_) {
    return absl::FailedPreconditionError(absl::StrCat(name(), ": a capture is already open"));
  }
  capturing_ = true;
  captured_.clear();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GpuGraph>> EmulatedGpuRuntime::EndCapture() {
  if (!capturing_) {
    return absl::FailedPreconditionError(absl::StrCat(name(), ": EndCapture without a capture"));
  }
  capturing_ = false;
  return std::make_unique<EmulatedGpuGraph>(this, std::exchange(captured_, {}));
}

absl::Status EmulatedGpuRuntime::LaunchGraph(
    const std::vector<std::function<absl::Status()>>& ops) {
  RETURN_IF_ERROR(CheckNotCapturing("a graph launch"));
  ++stats_.num_graph_launches;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (absl::Status status = ops[i](); !status.ok()) {
      return absl::Status(status.code(), absl::StrCat("graph node ", i, " of ", ops.size(), ": ",
                                                      status.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status EmulatedGpuRuntime::CopyHostToDevice(void* device, const void* host, size_t bytes) {
  RETURN_IF_ERROR(CheckNotCapturing("CopyHostToDevice"));
  RETURN_IF_ERROR(CheckDevice("CopyHostToDevice", "device", device, bytes));
  RETURN_IF_ERROR(CheckHost("CopyHostToDevice", host, bytes));
  if (bytes > 0) std::memcpy(device, host, bytes);
  return absl::OkStatus();
}

absl::Status EmulatedGpuRuntime::PinHost(void* host, size_t bytes) {
  if (host == nullptr || bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": PinHost of an empty region"));
  }
  RETURN_IF_ERROR(CheckHost("PinHost", host, bytes));
  const uintptr_t address = reinterpret_cast<uintptr_t>(host);
  auto next = pinned_host_.lower_bound(address);
  const bool overlaps_next = next != pinned_host_.end() && next->first < address + bytes;
  const bool overlaps_previous =
      next != pinned_host_.begin() && std::prev(next)->first + std::prev(next)->second > address;
  if (overlaps_next || overlaps_previous) {
    return absl::InternalError(absl::StrFormat(
        "%s: PinHost: %p (%d bytes) overlaps a region already pinned", name(), host, bytes));
  }
  pinned_host_.emplace(address, bytes);
  return absl::OkStatus();
}

absl::Status EmulatedGpuRuntime::UnpinHost(void* host) {
  if (pinned_host_.erase(reinterpret_cast<uintptr_t>(host)) == 0) {
    return absl::InternalError(
        absl::StrFormat("%s: UnpinHost: %p does not start a pinned region", name(), host));
  }
  return absl::OkStatus();
}

size_t EmulatedGpuRuntime::pinned_host_bytes() const {
  size_t total = 0;
  for (const auto& [address, bytes] : pinned_host_) total += bytes;
  return total;
}

absl::Status EmulatedGpuRuntime::CopyDeviceToHost(void* host, const void* device, size_t bytes) {
  RETURN_IF_ERROR(CheckNotCapturing("CopyDeviceToHost"));
  RETURN_IF_ERROR(CheckDevice("CopyDeviceToHost", "device", device, bytes));
  RETURN_IF_ERROR(CheckHost("CopyDeviceToHost", host, bytes));
  if (bytes > 0) std::memcpy(host, device, bytes);
  return absl::OkStatus();
}

absl::Status EmulatedGpuRuntime::CopyDeviceToDevice(void* device_dst, const void* device_src,
                                                    size_t bytes) {
  if (capturing_) {
    captured_.push_back([=, this] { return CopyDeviceToDevice(device_dst, device_src, bytes); });
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(CheckDevice("CopyDeviceToDevice", "device_dst", device_dst, bytes));
  RETURN_IF_ERROR(CheckDevice("CopyDeviceToDevice", "device_src", device_src, bytes));
  // cudaMemcpyAsync device to device allows overlap no more than memcpy does; memmove keeps an
  // overlapping copy defined here, which a real device would not promise.
  if (bytes > 0) std::memmove(device_dst, device_src, bytes);
  return absl::OkStatus();
}

absl::Status EmulatedGpuRuntime::CopyDeviceToDevice2D(void* device_dst, size_t dst_pitch,
                                                      const void* device_src, size_t src_pitch,
                                                      size_t width, size_t rows) {
  constexpr absl::string_view kOp = "CopyDeviceToDevice2D";
  if (width == 0 || rows == 0) return absl::OkStatus();
  if (dst_pitch < width || src_pitch < width) {
    // cudaMemcpy2DAsync's cudaErrorInvalidPitchValue, which a capture reports too.
    return absl::InvalidArgumentError(absl::StrCat(kOp, ": pitches ", dst_pitch, " and ",
                                                   src_pitch, " must be >= the width ", width));
  }
  if (capturing_) {
    captured_.push_back([=, this] {
      return CopyDeviceToDevice2D(device_dst, dst_pitch, device_src, src_pitch, width, rows);
    });
    return absl::OkStatus();
  }
  // Each region spans from its first row's start to its last row's end.
  RETURN_IF_ERROR(CheckDevice(kOp, "device_dst", device_dst, (rows - 1) * dst_pitch + width));
  RETURN_IF_ERROR(CheckDevice(kOp, "device_src", device_src, (rows - 1) * src_pitch + width));
  auto* dst = static_cast<std::byte*>(device_dst);
  const auto* src = static_cast<const std::byte*>(device_src);
  for (size_t i = 0; i < rows; ++i) std::memcpy(dst + i * dst_pitch, src + i * src_pitch, width);
  return absl::OkStatus();
}

absl::Status EmulatedGpuRuntime::Run(const kernels::EmbeddingParams& p) {
  constexpr absl::string_view kOp = "Embedding";
  RETURN_IF_ERROR(kernels::Validate(p));
  RETURN_IF_ERROR(CheckDevice(kOp, "out", p.out, Bytes<float>(int64_t{p.num_tokens} * p.hidden)));
  RETURN_IF_ERROR(CheckDevice(kOp, "token_ids", p.token_ids, Bytes<int32_t>(p.num_tokens)));
  if (p.table != nullptr) {  // weights are device memory even when no token reads them
    RETURN_IF_ERROR(CheckDevice(
        kOp, "table", p.table,
        static_cast<size_t>(p.vocab_size) * p.hidden * DTypeBytes(p.table_dtype)));
  }
  return kernels::EmbeddingEmulated(p);
}

absl::Status EmulatedGpuRuntime::Run(const kernels::RmsNormParams& p) {
  constexpr absl::string_view kOp = "RmsNorm";
  RETURN_IF_ERROR(kernels::Validate(p));
  const size_t bytes = Bytes<float>(int64_t{p.num_tokens} * p.hidden);
  RETURN_IF_ERROR(CheckDevice(kOp, "out", p.out, bytes));
  RETURN_IF_ERROR(CheckDevice(kOp, "in", p.in, bytes));
  if (p.weight != nullptr) {
    RETURN_IF_ERROR(CheckDevice(kOp, "weight", p.weight, Bytes<float>(p.hidden)));
  }
  return kernels::RmsNormEmulated(p);
}

absl::Status EmulatedGpuRuntime::Run(const kernels::RopeParams& p) {
  constexpr absl::string_view kOp = "Rope";
  RETURN_IF_ERROR(kernels::Validate(p));
  RETURN_IF_ERROR(CheckDevice(kOp, "q", p.q,
                              RowsBytes<float>(p.num_tokens, p.q_stride,
                                               int64_t{p.num_heads} * p.head_dim)));
  RETURN_IF_ERROR(CheckDevice(kOp, "k", p.k,
                              RowsBytes<float>(p.num_tokens, p.k_stride,
                                               int64_t{p.num_kv_heads} * p.head_dim)));
  RETURN_IF_ERROR(CheckDevice(kOp, "positions", p.positions, Bytes<int32_t>(p.num_tokens)));
  if (p.inv_freq != nullptr) {
    RETURN_IF_ERROR(CheckDevice(kOp, "inv_freq", p.inv_freq, Bytes<float>(p.head_dim / 2)));
  }
  return kernels::RopeEmulated(p);
}

absl::Status EmulatedGpuRuntime::Run(const kernels::KvWriteParams& p) {
  constexpr absl::string_view kOp = "KvWrite";
  RETURN_IF_ERROR(kernels::Validate(p));
  const int64_t row = int64_t{p.cache.num_kv_heads} * p.cache.head_dim;
  RETURN_IF_ERROR(CheckDevice(kOp, "k", p.k, RowsBytes<float>(p.num_tokens, p.kv_stride, row)));
  RETURN_IF_ERROR(CheckDevice(kOp, "v", p.v, RowsBytes<float>(p.num_tokens, p.kv_stride, row)));
  RETURN_IF_ERROR(
      CheckDevice(kOp, "slot_mapping", p.slot_mapping, Bytes<int32_t>(p.num_tokens)));
  // The pool must hold every slot written (negative slots are skipped), and all of num_blocks.
  int64_t num_blocks = p.cache.num_blocks;
  for (int t = 0; t < p.num_tokens; ++t) {
    if (p.slot_mapping[t] >= 0) {
      num_blocks = std::max<int64_t>(num_blocks, p.slot_mapping[t] / p.cache.block_size + 1);
    }
  }
  RETURN_IF_ERROR(CheckCache(kOp, p.cache, num_blocks));
  return kernels::KvWriteEmulated(p);
}

absl::Status EmulatedGpuRuntime::Run(const kernels::KvGatherParams& p) {
  constexpr absl::string_view kOp = "KvGather";
  RETURN_IF_ERROR(kernels::Validate(p));
  RETURN_IF_ERROR(CheckDevice(kOp, "out_start", p.out_start,
                              p.num_seqs > 0 ? Bytes<int32_t>(p.num_seqs + 1) : 0));
  RETURN_IF_ERROR(CheckDevice(kOp, "block_tables", p.block_tables,
                              Bytes<int32_t>(int64_t{p.num_seqs} * p.max_blocks_per_seq)));
  const int64_t num_rows = p.num_seqs > 0 ? p.out_start[p.num_seqs] : 0;
  const int64_t row = int64_t{p.cache.num_kv_heads} * p.cache.head_dim;
  RETURN_IF_ERROR(
      CheckDevice(kOp, "k_out", p.k_out, RowsBytes<float>(num_rows, p.out_stride, row)));
  RETURN_IF_ERROR(
      CheckDevice(kOp, "v_out", p.v_out, RowsBytes<float>(num_rows, p.out_stride, row)));
  ASSIGN_OR_RETURN(const int64_t used_blocks,
                   BlocksNeeded(name(), kOp, p.block_tables, p.num_seqs, p.max_blocks_per_seq,
                                [&](int s) {
                                  return BlocksOf(p.out_start[s + 1] - p.out_start[s],
                                                  p.cache.block_size, p.max_blocks_per_seq);
                                }));
  RETURN_IF_ERROR(CheckCache(kOp, p.cache, std::max<int64_t>(p.cache.num_blocks, used_blocks)));
  return kernels::KvGatherEmulated(p);
}

absl::Status EmulatedGpuRuntime::Run(const kernels::PagedAttentionParams& p) {
  constexpr absl::string_view kOp = "PagedAttentionDecode";
  RETURN_IF_ERROR(kernels::Validate(p));
  RETURN_IF_ERROR(CheckPagedAttention(kOp, p));
  return kernels::PagedAttentionDecodeEmulated(p);
}

absl::Status EmulatedGpuRuntime::Run(const kernels::PagedAttentionSplitKvParams& p) {
  constexpr absl::string_view kOp = "PagedAttentionSplitKv";
  RETURN_IF_ERROR(kernels::Validate(p));
  RETURN_IF_ERROR(CheckPagedAttention(kOp, p.attn));
  RETURN_IF_ERROR(CheckDevice(kOp, "workspace", p.workspace,
                              kernels::PagedAttentionSplitKvWorkspaceBytes(p.attn, p.num_splits)));
  return kernels::PagedAttentionSplitKvEmulated(p);
}

absl::Status EmulatedGpuRuntime::CheckPagedAttention(absl::string_view op,
                                                     const kernels::PagedAttentionParams& p) const {
  const int64_t q_row = int64_t{p.num_heads} * p.cache.head_dim;
  RETURN_IF_ERROR(CheckDevice(op, "out", p.out, Bytes<float>(p.num_seqs * q_row)));
  RETURN_IF_ERROR(CheckDevice(op, "q", p.q, RowsBytes<float>(p.num_seqs, p.q_stride, q_row)));
  RETURN_IF_ERROR(CheckDevice(op, "block_tables", p.block_tables,
                              Bytes<int32_t>(int64_t{p.num_seqs} * p.max_blocks_per_seq)));
  RETURN_IF_ERROR(CheckDevice(op, "context_lens", p.context_lens, Bytes<int32_t>(p.num_seqs)));
  ASSIGN_OR_RETURN(const int64_t used_blocks,
                   BlocksNeeded(name(), op, p.block_tables, p.num_seqs, p.max_blocks_per_seq,
                                [&](int s) {
                                  return BlocksOf(p.context_lens[s], p.cache.block_size,
                                                  p.max_blocks_per_seq);
                                }));
  return CheckCache(op, p.cache, std::max<int64_t>(p.cache.num_blocks, used_blocks));
}

absl::Status EmulatedGpuRuntime::Run(const kernels::PrefillAttentionParams& p) {
  constexpr absl::string_view kOp = "PrefillAttention";
  RETURN_IF_ERROR(kernels::Validate(p));
  const size_t starts_bytes = p.num_seqs > 0 ? Bytes<int32_t>(p.num_seqs + 1) : 0;
  RETURN_IF_ERROR(CheckDevice(kOp, "q_start", p.q_start, starts_bytes));
  RETURN_IF_ERROR(CheckDevice(kOp, "kv_start", p.kv_start, starts_bytes));
  const int64_t num_q = p.num_seqs > 0 ? p.q_start[p.num_seqs] : 0;
  const int64_t num_kv = p.num_seqs > 0 ? p.kv_start[p.num_seqs] : 0;
  const int64_t q_row = int64_t{p.num_heads} * p.head_dim;
  const int64_t kv_row = int64_t{p.num_kv_heads} * p.head_dim;
  RETURN_IF_ERROR(CheckDevice(kOp, "out", p.out, Bytes<float>(num_q * q_row)));
  RETURN_IF_ERROR(CheckDevice(kOp, "q", p.q, RowsBytes<float>(num_q, p.q_stride, q_row)));
  RETURN_IF_ERROR(CheckDevice(kOp, "k", p.k, RowsBytes<float>(num_kv, p.kv_stride, kv_row)));
  RETURN_IF_ERROR(CheckDevice(kOp, "v", p.v, RowsBytes<float>(num_kv, p.kv_stride, kv_row)));
  return kernels::PrefillAttentionEmulated(p);
}

absl::Status EmulatedGpuRuntime::Run(const kernels::SwigluParams& p) {
  constexpr absl::string_view kOp = "Swiglu";
  RETURN_IF_ERROR(kernels::Validate(p));
  RETURN_IF_ERROR(
      CheckDevice(kOp, "out", p.out, RowsBytes<float>(p.num_tokens, p.out_stride, p.intermediate)));
  RETURN_IF_ERROR(
      CheckDevice(kOp, "gate", p.gate, RowsBytes<float>(p.num_tokens, p.in_stride, p.intermediate)));
  RETURN_IF_ERROR(
      CheckDevice(kOp, "up", p.up, RowsBytes<float>(p.num_tokens, p.in_stride, p.intermediate)));
  return kernels::SwigluEmulated(p);
}

absl::Status EmulatedGpuRuntime::Run(const kernels::AddParams& p) {
  constexpr absl::string_view kOp = "Add";
  RETURN_IF_ERROR(kernels::Validate(p));
  RETURN_IF_ERROR(CheckDevice(kOp, "out", p.out, Bytes<float>(p.n)));
  RETURN_IF_ERROR(CheckDevice(kOp, "a", p.a, Bytes<float>(p.n)));
  RETURN_IF_ERROR(CheckDevice(kOp, "b", p.b, Bytes<float>(p.n)));
  return kernels::AddEmulated(p);
}

absl::Status EmulatedGpuRuntime::Run(const kernels::AddRmsNormParams& p) {
  constexpr absl::string_view kOp = "AddRmsNorm";
  RETURN_IF_ERROR(kernels::Validate(p));
  const size_t bytes = Bytes<float>(int64_t{p.num_tokens} * p.hidden);
  RETURN_IF_ERROR(CheckDevice(kOp, "out", p.out, bytes));
  RETURN_IF_ERROR(CheckDevice(kOp, "residual", p.residual, bytes));
  RETURN_IF_ERROR(CheckDevice(kOp, "in", p.in, bytes));
  RETURN_IF_ERROR(CheckDevice(kOp, "weight", p.weight, Bytes<float>(p.hidden)));
  return kernels::AddRmsNormEmulated(p);
}

absl::Status EmulatedGpuRuntime::Run(const kernels::SampleParams& p) {
  constexpr absl::string_view kOp = "Sample";
  RETURN_IF_ERROR(kernels::Validate(p));
  RETURN_IF_ERROR(
      CheckDevice(kOp, "logits", p.logits, Bytes<float>(int64_t{p.num_seqs} * p.vocab_size)));
  RETURN_IF_ERROR(CheckDevice(kOp, "temperature", p.temperature, Bytes<float>(p.num_seqs)));
  RETURN_IF_ERROR(CheckDevice(kOp, "top_k", p.top_k, Bytes<int32_t>(p.num_seqs)));
  RETURN_IF_ERROR(CheckDevice(kOp, "top_p", p.top_p, Bytes<float>(p.num_seqs)));
  RETURN_IF_ERROR(CheckDevice(kOp, "seed", p.seed, Bytes<uint64_t>(p.num_seqs)));
  RETURN_IF_ERROR(CheckDevice(kOp, "draw_idx", p.draw_idx, Bytes<uint64_t>(p.num_seqs)));
  RETURN_IF_ERROR(CheckDevice(kOp, "token_ids", p.token_ids, Bytes<int32_t>(p.num_seqs)));
  if (p.logprobs != nullptr) {
    RETURN_IF_ERROR(CheckDevice(kOp, "logprobs", p.logprobs, Bytes<float>(p.num_seqs)));
  }
  if (p.min_p != nullptr) {
    RETURN_IF_ERROR(CheckDevice(kOp, "min_p", p.min_p, Bytes<float>(p.num_seqs)));
  }
  return kernels::SampleEmulated(p);
}

absl::Status EmulatedGpuRuntime::Run(const kernels::LogitsProcessorsParams& p) {
  constexpr absl::string_view kOp = "LogitsProcessors";
  RETURN_IF_ERROR(kernels::Validate(p));
  if (p.num_seqs == 0) return absl::OkStatus();
  RETURN_IF_ERROR(
      CheckDevice(kOp, "logits", p.logits, Bytes<float>(int64_t{p.num_seqs} * p.vocab_size)));
  RETURN_IF_ERROR(CheckDevice(kOp, "entry_offsets", p.entry_offsets, Bytes<int32_t>(p.num_seqs + 1)));
  for (const auto& [field, ptr] : {std::pair<const char*, const void*>{"repetition_penalty", p.repetition_penalty},
                                   {"frequency_penalty", p.frequency_penalty},
                                   {"presence_penalty", p.presence_penalty},
                                   {"num_generated", p.num_generated},
                                   {"min_tokens", p.min_tokens}}) {
    RETURN_IF_ERROR(CheckDevice(kOp, field, ptr, Bytes<float>(p.num_seqs)));
  }
  // The offsets are device memory, but device memory is host memory here: how far entries is read.
  const int64_t num_entries = p.entry_offsets[p.num_seqs];
  if (num_entries > 0) {
    RETURN_IF_ERROR(CheckDevice(kOp, "entries", p.entries,
                                static_cast<size_t>(num_entries) * sizeof(kernels::LogitsTokenEntry)));
  }
  return kernels::LogitsProcessorsEmulated(p);
}

absl::Status EmulatedGpuRuntime::Run(const kernels::TokenBitmaskParams& p) {
  constexpr absl::string_view kOp = "TokenBitmask";
  RETURN_IF_ERROR(kernels::Validate(p));
  if (p.num_masked == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckDevice(kOp, "bitmask", p.bitmask, Bytes<int32_t>(int64_t{p.num_masked} * p.bitmask_words)));
  RETURN_IF_ERROR(CheckDevice(kOp, "rows", p.rows, Bytes<int32_t>(p.num_masked)));
  // The logits' rows are the caller's batch; the masked ones at least reach the largest row named
  // (the row ids are device memory here, which the emulation may read).
  int64_t num_rows = 0;
  for (int m = 0; m < p.num_masked; ++m) num_rows = std::max<int64_t>(num_rows, int64_t{p.rows[m]} + 1);
  RETURN_IF_ERROR(CheckDevice(kOp, "logits", p.logits, Bytes<float>(num_rows * p.vocab_size)));
  return kernels::TokenBitmaskEmulated(p);
}

absl::Status EmulatedGpuRuntime::Run(const kernels::MatmulParams& p) {
  constexpr absl::string_view kOp = "Matmul";  // the op the backend was asked for
  RETURN_IF_ERROR(kernels::Validate(p));
  RETURN_IF_ERROR(CheckDevice(kOp, "out", p.out, Bytes<float>(int64_t{p.m} * p.n)));
  RETURN_IF_ERROR(CheckDevice(kOp, "in", p.in, Bytes<float>(int64_t{p.m} * p.k)));
  if (p.weight != nullptr) {
    RETURN_IF_ERROR(CheckDevice(kOp, "weight", p.weight,
                                StorageBytes(p.weight_dtype, int64_t{p.n} * p.k)));
  }
  if (p.bias != nullptr) RETURN_IF_ERROR(CheckDevice(kOp, "bias", p.bias, Bytes<float>(p.n)));
  const int64_t num_scales =
      p.weight_group_size > 0 ? int64_t{p.n} * (p.k / p.weight_group_size) : p.n;
  if (p.weight_scales != nullptr) {
    RETURN_IF_ERROR(CheckDevice(kOp, "weight_scales", p.weight_scales, Bytes<float>(num_scales)));
  }
  if (p.weight_zeros != nullptr) {
    RETURN_IF_ERROR(CheckDevice(kOp, "weight_zeros", p.weight_zeros, Bytes<float>(num_scales)));
  }
  // Decode batches with int8 weights: the CUDA runtime's GEMV kernel, emulated.
  if (p.weight_dtype == DType::kI8 && p.m <= kernels::kMatmulInt8GemvMaxRows) {
    return kernels::MatmulInt8GemvEmulated(p);
  }
  if (p.weight_dtype == DType::kI4 && p.m <= kernels::kMatmulInt4GemvMaxRows) {
    return kernels::MatmulInt4GemvEmulated(p);
  }
  if (p.weight_dtype == DType::kF8E4M3 && p.m <= kernels::kMatmulFp8GemvMaxRows) {
    return kernels::MatmulFp8GemvEmulated(p);
  }
  // The CPU BLAS stands in for cuBLAS; its bf16 and f16 paths round the activations to the weights'
  // dtype first, as the CUDA runtime's bf16 and f16 GEMMs do, and its int8 path computes what the
  // CUDA runtime's widened panels do (bf16 activations, exact integers, sums times the scales).
  // fp8 weights past the GEMV: the CUDA runtime's bf16 panels; MatmulCpu dequantizes panels for
  // prefill sizes and widens the codes exactly below them, the same product up to rounding.
  return kernels::MatmulCpu(p, nullptr);
}

}  // namespace baton::runtime
