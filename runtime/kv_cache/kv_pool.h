// KvPool: the storage of a paged KV cache on the host (the CPU backend).
//
// Layout: [num_blocks][num_layers][2 (K, V)][block_size][num_kv_heads][head_dim] f32. A block holds its
// tokens' K and V for every layer contiguously, so migrating a block to another instance is one copy
// of BlockBytes(), and a run of consecutive block ids is one contiguous range. Kernels see one layer
// through LayerView(). Owns the memory; not thread-safe beyond concurrent reads/writes of disjoint
// blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "baton/kernels/paged_kv.h"
#include "runtime/kv_cache/block_allocator.h"

namespace baton::runtime {

struct KvPoolShape {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;  // tokens per block

  int64_t BlockElems() const {
    return static_cast<int64_t>(num_layers) * 2 * block_size * num_kv_heads * head_dim;
  }
  size_t BlockBytes() const { return static_cast<size_t>(BlockElems()) * sizeof(float); }
};

class KvPool {
 public:
  // InvalidArgument for a non-positive shape; ResourceExhausted if the memory cannot be had.
  static absl::StatusOr<std::unique_ptr<KvPool>> Create(const KvPoolShape& shape, int num_blocks);
  // The number of blocks that fit in budget_bytes (at least 0).
  static int NumBlocksForBudget(const KvPoolShape& shape, size_t budget_bytes);

  ~KvPool();
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  const KvPoolShape& shape() const { return shape_; }
  int num_blocks() const { return num_blocks_; }
  size_t BlockBytes() const { return shape_.BlockBytes(); }

  kernels::PagedKvView LayerView(int layer_idx) const;
  // Start of block `block` (BlockBytes() bytes: all layers, K then V per layer).
  std::byte* BlockData(BlockId block) const;

 private:
  KvPool(const KvPoolShape& shape, int num_blocks, float* data, size_t num_bytes)
      : shape_(shape), num_blocks_(num_blocks), data_(data), num_bytes_(num_bytes) {}

  KvPoolShape shape_;
  int num_blocks_;
  float* data_;  // [num_blocks, BlockElems()], anonymous mmap (pages zero until touched)
  size_t num_bytes_;
};

}  // namespace baton::runtime
