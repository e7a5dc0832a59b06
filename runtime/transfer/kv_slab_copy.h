// KV slab copy: the byte ranges that move one slab (layers x KV heads, kv_slab_mapping.h) of a list
// of blocks from a source pool into a destination pool of a different shape, and the copy itself.
//
// A KvPool block is [num_layers][2 (K, V)][num_kv_heads][block_size][head_dim] of its dtype
// (kv_pool.h), the same on both sides (the copy moves bytes, it does not convert):
// head-major within a layer, so KV heads [h0, h1) of one layer's K (or V) are one contiguous range
// of (h1 - h0) * block_size * head_dim elements on either side. One slab of one block is therefore
// 2 x slab.num_layers() ranges. SlabByteRanges emits them in order (block, layer, K then V) and
// merges a range into the previous one when it continues it on BOTH sides: a slab that spans all
// KV heads of both pools becomes one range per block, and one that spans the whole block on both
// sides (same shape, whole pool) becomes one range per run of consecutive blocks (as
// kv_cache/block_runs.h).
//
// Offsets are in bytes from the start of block 0's data of each pool (KvPool::BlockData(0),
// KvPoolMapping::BlockData(0)). Pure arithmetic, no I/O, except CopyByteRanges.
//
// The TCP transport moves the same ranges through a byte stream (tcp_wire.h): the server sends a
// slab of a run of blocks "packed", as blocks 0, 1, ... of a pool holding only the slab's layers
// and KV heads (PackedSlabByteRanges gives the server's side), and the client receives the stream
// straight into the destination ranges of SlabByteRanges, which come in the same order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "runtime/kv_cache/kv_pool.h"
#include "runtime/transfer/kv_slab_mapping.h"

namespace baton::runtime {

struct KvByteRange {
  int64_t src_offset = 0;  // bytes from the start of the source pool's block 0
  int64_t dst_offset = 0;  // bytes from the start of the destination pool's block 0
  int64_t num_bytes = 0;   // > 0
  bool operator==(const KvByteRange&) const = default;
};

// OK if `slab` can be copied between pools of these shapes: equal dtype, head_dim and block_size,
// the slab non-empty, and its source-local layers/heads (src_layer_idx, src_kv_head_idx, sizes) inside
// src_shape and its destination-local ones inside dst_shape. InvalidArgument naming the numbers
// otherwise. The global indices of the slab (layer_begin, ...) are only used for its sizes.
absl::Status CheckSlabFits(const KvPoolShape& src_shape, const KvPoolShape& dst_shape,
                           const KvSlab& slab);

// The ranges that copy `slab` of source block src_blocks[i] into destination block dst_blocks[i],
// for every i, merged as described at the top. Pre-conditions: CheckSlabFits(...) is OK,
// src_blocks.size() == dst_blocks.size(), ids non-negative. The sum of num_bytes is
// src_blocks.size() * slab.num_layers() * slab.num_kv_heads() * 2 * block_size * head_dim *
// DTypeBytes(dtype).
std::vector<KvByteRange> SlabByteRanges(const KvPoolShape& src_shape, const KvPoolShape& dst_shape,
                                        const KvSlab& slab, std::span<const BlockId> src_blocks,
                                        std::span<const BlockId> dst_blocks);

// The slab that covers every layer and KV head of a pool of `shape`, local index 0 on both sides: a
// same-layout (whole-block) pull is this one slab, and its ranges are the block runs.
KvSlab WholePoolSlab(const KvPoolShape& shape);

// The shape of `slab` alone: its layers and KV heads, with head_dim, block_size and dtype of
// `pool_shape`.
KvPoolShape PackedSlabShape(const KvSlab& slab, const KvPoolShape& pool_shape);

// The ranges that send `slab` of blocks src_start .. src_start + num_blocks - 1 of a pool of
// src_shape as one packed byte stream: SlabByteRanges into blocks 0 .. num_blocks - 1 of a pool of
// PackedSlabShape(slab, src_shape), the slab's destination indices taken as 0. dst_offset is the
// offset in that stream; ranges are merged where the source continues. The stream is ordered
// (block, layer, K then V), as SlabByteRanges orders any destination. Pre-conditions:
// CheckSlabFits(src_shape, PackedSlabShape(...), slab) is OK, num_blocks >= 0, src_start >= 0.
std::vector<KvByteRange> PackedSlabByteRanges(const KvPoolShape& src_shape, const KvSlab& slab,
                                              BlockId src_start, int num_blocks);

// memcpy(dst_base + r.dst_offset, src_base + r.src_offset, r.num_bytes) for every range. The caller
// guarantees every range lies inside both pools.
void CopyByteRanges(const std::byte* src_base, std::byte* dst_base,
                    std::span<const KvByteRange> ranges);

// The sum of num_bytes over `ranges`.
int64_t TotalBytes(std::span<const KvByteRange> ranges);

}  // namespace baton::runtime
