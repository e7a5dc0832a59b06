// The paged KV cache as the kernels see it: a view over one layer's K and V blocks. The ops that go
// through it: kv_write.h (new tokens into their slots), kv_gather.h (cached tokens out into
// contiguous rows) and paged_attention.h (decode attention).
//
// A block holds `block_size` consecutive tokens (slots) of one sequence. Element (block b, slot s,
// kv head h, dim d) of K is at
//     k[b * block_stride + (h * block_size + s) * head_dim + d]
// and likewise for V: head-major inside a block, so the block's keys of one head (what decode
// attention reads for one (sequence, kv head)) are one contiguous run of block_size * head_dim.
// The pool stores all layers of a block contiguously, so in general
// block_stride > block_size * num_kv_heads * head_dim; the caller offsets `k`/`v` to the layer.
// A slot index (as in KvWriteParams::slot_mapping) is block_id * block_size + slot.
//
// Elements are f32 or bf16 (`dtype`). A bf16 cache halves the bytes decode attention streams per
// token, which bounds the decode step at long contexts; the kernels widen it to f32 on load, so
// only storage rounds (kv_write rounds to nearest even) and all arithmetic stays f32.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "baton/kernels/host_device.h"
#include "kernels/common/dtype.h"

namespace baton::kernels {

// A non-owning view; valid on host and device (plain pointers and integers).
struct PagedKvView {
  void* k;               // [num_blocks, block_stride] holding [num_kv_heads, block_size, head_dim]
  void* v;               // [num_blocks, block_stride] holding [num_kv_heads, block_size, head_dim]
  int64_t block_stride;  // elements (not bytes) between the starts of consecutive blocks
  int block_size;        // tokens (slots) per block, >= 1
  int num_kv_heads;
  int head_dim;
  // Blocks in the pool. 0 means "unknown": block ids and slots are then not range-checked.
  int num_blocks = 0;
  DType dtype = DType::kF32;  // of k and v: IsKvDType (kF32 or kBF16)
};

// Checks the view's geometry: non-null pointers, positive sizes,
// block_stride >= block_size * num_kv_heads * head_dim, and an f32 or bf16 dtype.
absl::Status Validate(const PagedKvView& view);

// Offset (in elements) of (slot index, kv head) inside k or v; the caller adds the dim.
BATON_HOST_DEVICE inline int64_t KvOffset(const PagedKvView& view, int64_t slot_idx, int kv_head) {
  const int64_t block_id = slot_idx / view.block_size;
  const int64_t slot = slot_idx % view.block_size;
  return block_id * view.block_stride + (kv_head * int64_t{view.block_size} + slot) * view.head_dim;
}

// k or v typed as the view's element: T is float for kF32, uint16_t (the bf16 bits) for kBF16.
template <typename T>
BATON_HOST_DEVICE inline T* KvData(void* data) {
  return static_cast<T*>(data);
}

}  // namespace baton::kernels
