// KvPool: the storage of a paged KV cache on the host (the CPU backend).
//
// Layout: [num_blocks][num_layers][2 (K, V)][num_kv_heads][block_size][head_dim] of the shape's
// dtype (f32, or bf16: half the bytes that decode attention reads per token). A block
// holds its tokens' K and V for every layer contiguously, so migrating a block to another instance
// is one copy of BlockBytes(), and a run of consecutive block ids is one contiguous range. Kernels
// see one layer through LayerView(). Owns the memory; not thread-safe beyond concurrent
// reads/writes of disjoint blocks.
//
// Shared pools: with KvPoolOptions::shm_name set, the pool lives in a POSIX shared-memory segment
// (shm_open + ftruncate + mmap MAP_SHARED) so that another process on the same host can map it
// read-only (runtime/transfer/kv_pool_mapping.h) and copy blocks out of it. The segment starts
// with a KvSegmentHeader page that describes the pool; block data follows at
// kKvSegmentHeaderBytes. The owner unlinks the segment in its destructor. A SIGKILLed owner
// cannot: its launcher removes the leftovers by name (runtime/transfer/kv_segment_names.h,
// RemoveStaleKvSegments).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "baton/kernels/paged_kv.h"
#include "kernels/common/dtype.h"
#include "runtime/kv_cache/block_allocator.h"

namespace baton::runtime {

struct KvPoolShape {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;  // tokens per block
  DType dtype = DType::kF32;  // of the K and V elements: kF32 or kBF16

  int64_t BlockElems() const {
    return static_cast<int64_t>(num_layers) * 2 * block_size * num_kv_heads * head_dim;
  }
  size_t BlockBytes() const { return static_cast<size_t>(BlockElems()) * DTypeBytes(dtype); }
  bool operator==(const KvPoolShape&) const = default;
};

struct KvPoolOptions {
  // "" (default): private anonymous memory. Otherwise the POSIX shared-memory name of a NEW
  // segment, "/name" with no other '/' (e.g. NewKvSegmentName()); Create fails with AlreadyExists
  // if it exists.
  std::string shm_name;
  // Non-null: the pool's blocks live in this memory instead, num_blocks * BlockBytes() bytes that
  // the caller owns and keeps alive longer than the pool: a device backend's allocation (a GPU's
  // memory, which the host cannot read; runtime/engine/model_ranks.cc). Excludes shm_name.
  std::byte* device_storage = nullptr;
  // With device_storage: the CUDA device that memory is on (the KV links of the transfer layer
  // make it current). Ignored otherwise.
  int device_ordinal = 0;
};

// The first page of a shared pool's segment. Written by the owner before the segment is used;
// `magic` is stored last (release), so a reader that sees kMagic (acquire) sees the other fields.
struct KvSegmentHeader {
  static constexpr uint64_t kMagic = 0x31564b4e4f544142;  // "BATONKV1" little-endian
  // 2 added dtype; version 1 knew only f32 pools.
  static constexpr uint32_t kVersion = 2;

  uint64_t magic;
  uint32_t version;
  int32_t num_layers;
  int32_t num_kv_heads;
  int32_t head_dim;
  int32_t block_size;
  int32_t num_blocks;
  uint32_t dtype;              // static_cast<uint32_t>(shape.dtype): 0 f32, 2 bf16
  int64_t owner_pid;           // getpid() of the process that created (and will unlink) the segment
  uint64_t data_offset_bytes;  // where block 0 starts: kKvSegmentHeaderBytes
  uint64_t data_bytes;         // num_blocks * BlockBytes()
};
inline constexpr size_t kKvSegmentHeaderBytes = 4096;  // one page, so block data stays page-aligned
static_assert(sizeof(KvSegmentHeader) <= kKvSegmentHeaderBytes);

class KvPool {
 public:
  // InvalidArgument for a non-positive shape or a malformed shm name; ResourceExhausted if the
  // memory cannot be had (for a shared pool: the whole pool is reserved in /dev/shm up front with
  // posix_fallocate, so a too-small /dev/shm fails here rather than with SIGBUS later);
  // AlreadyExists if the shm segment exists.
  static absl::StatusOr<std::unique_ptr<KvPool>> Create(const KvPoolShape& shape, int num_blocks,
                                                        const KvPoolOptions& options);
  static absl::StatusOr<std::unique_ptr<KvPool>> Create(const KvPoolShape& shape, int num_blocks) {
    return Create(shape, num_blocks, KvPoolOptions{});
  }
  // The number of blocks that fit in budget_bytes (at least 0).
  static int NumBlocksForBudget(const KvPoolShape& shape, size_t budget_bytes);

  // Unmaps; a shared pool also unlinks its segment (only in the creating process, not in a fork).
  // Other processes' existing mappings stay valid; new opens fail.
  ~KvPool();
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  const KvPoolShape& shape() const { return shape_; }
  int num_blocks() const { return num_blocks_; }
  size_t BlockBytes() const { return shape_.BlockBytes(); }
  // The shm segment name, "" for a private pool.
  const std::string& shm_name() const { return shm_name_; }
  // True when the blocks live in a device's memory (KvPoolOptions::device_storage): LayerView and
  // BlockData are device addresses then, for the device's ops, not for host reads or transports.
  bool on_device() const { return mapping_ == nullptr; }
  // The CUDA device of a pool on_device() (KvPoolOptions::device_ordinal); meaningless otherwise.
  int device_ordinal() const { return device_ordinal_; }

  kernels::PagedKvView LayerView(int layer_idx) const;
  // Start of block `block` (BlockBytes() bytes: all layers, K then V per layer).
  std::byte* BlockData(BlockId block) const;

 private:
  // `device`: `mapping` is the caller's device storage, not mapped (nor unmapped) here.
  KvPool(const KvPoolShape& shape, int num_blocks, std::byte* mapping, size_t mapping_bytes,
         size_t data_offset_bytes, std::string shm_name, int64_t owner_pid, bool device = false)
      : shape_(shape),
        num_blocks_(num_blocks),
        mapping_(device ? nullptr : mapping),
        mapping_bytes_(mapping_bytes),
        data_(mapping + data_offset_bytes),
        shm_name_(std::move(shm_name)),
        owner_pid_(owner_pid) {}

  KvPoolShape shape_;
  int num_blocks_;
  std::byte* mapping_;    // [mapping_bytes_]: the header page (shared pools only), then data_;
                          // nullptr for a pool in device storage
  size_t mapping_bytes_;
  std::byte* data_;  // [num_blocks, BlockBytes()]; zero pages, lazily (anonymous) or reserved (shm)
  std::string shm_name_;  // "" for a private pool
  int64_t owner_pid_;     // the process that unlinks shm_name_
  int device_ordinal_ = 0;
};

}  // namespace baton::runtime
