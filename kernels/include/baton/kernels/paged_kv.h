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
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "baton/kernels/host_device.h"

namespace baton::kernels {

// A non-owning view; valid on host and device (plain pointers and integers).
struct PagedKvView {
  float* k;              // [num_blocks, block_stride] holding [num_kv_heads, block_size, head_dim]
  float* v;              // [num_blocks, block_stride] holding [num_kv_heads, block_size, head_dim]
  int64_t block_stride;  // elements between the starts of consecutive blocks
  int block_size;        // tokens (slots) per block, >= 1
  int num_kv_heads;
  int head_dim;
  // Blocks in the pool. 0 means "unknown": block ids and slots are then not range-checked.
  int num_blocks = 0;
};

// Checks the view's geometry: non-null pointers, positive sizes, and
// block_stride >= block_size * num_kv_heads * head_dim.
absl::Status Validate(const PagedKvView& view);

// Offset (in elements) of (slot index, kv head) inside k or v; the caller adds the dim.
BATON_HOST_DEVICE inline int64_t KvOffset(const PagedKvView& view, int64_t slot_idx, int kv_head) {
  const int64_t block_id = slot_idx / view.block_size;
  const int64_t slot = slot_idx % view.block_size;
  return block_id * view.block_stride + (kv_head * int64_t{view.block_size} + slot) * view.head_dim;
}

}  // namespace baton::kernels
