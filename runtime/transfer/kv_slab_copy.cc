#include "runtime/transfer/kv_slab_copy.h"

#include <cstring>
#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"

namespace baton::runtime {

absl::Status CheckSlabFits(const KvPoolShape& src_shape, const KvPoolShape& dst_shape,
                           const KvSlab& slab) {
  // The copy moves bytes: elements of another width would land as garbage, not converted.
  if (src_shape.dtype != dst_shape.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV slab copy: the source pool holds ", std::string(DTypeName(src_shape.dtype)),
        " elements but the destination holds ", std::string(DTypeName(dst_shape.dtype))));
  }
  if (src_shape.head_dim != dst_shape.head_dim || src_shape.block_size != dst_shape.block_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV slab copy: source head_dim ", src_shape.head_dim, ", block_size ",
        src_shape.block_size, " differ from the destination's head_dim ", dst_shape.head_dim,
        ", block_size ", dst_shape.block_size));
  }
  if (slab.num_layers() < 1 || slab.num_kv_heads() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("KV slab copy: empty slab (layers [",
                                                   slab.layer_begin, ", ", slab.layer_end,
                                                   "), kv heads [", slab.kv_head_begin, ", ",
                                                   slab.kv_head_end, "))"));
  }
  // In 64 bits: a KvServer checks slabs built from untrusted wire integers.
  const auto fits = [&](const char* side, const KvPoolShape& shape, int64_t layer_idx,
                        int64_t kv_head_idx) -> absl::Status {
    if (layer_idx < 0 || kv_head_idx < 0 || layer_idx + slab.num_layers() > shape.num_layers ||
        kv_head_idx + slab.num_kv_heads() > shape.num_kv_heads) {
      return absl::InvalidArgumentError(absl::StrCat(
          "KV slab copy: ", side, "-local layers [", layer_idx, ", ",
          layer_idx + slab.num_layers(), ") x kv heads [", kv_head_idx, ", ",
          kv_head_idx + slab.num_kv_heads(), ") outside the ", side, " pool's ",
          shape.num_layers, " layers x ", shape.num_kv_heads, " kv heads"));
    }
    return absl::OkStatus();
  };
  if (absl::Status status = fits("source", src_shape, slab.src_layer_idx, slab.src_kv_head_idx);
      !status.ok()) {
    return status;
  }
  return fits("destination", dst_shape, slab.dst_layer_idx, slab.dst_kv_head_idx);
}

std::vector<KvByteRange> SlabByteRanges(const KvPoolShape& src_shape, const KvPoolShape& dst_shape,
                                        const KvSlab& slab, std::span<const BlockId> src_blocks,
                                        std::span<const BlockId> dst_blocks) {
  // One KV head of one layer's K (or V) in a block: block_size x head_dim elements.
  const int64_t head_bytes = static_cast<int64_t>(src_shape.block_size) * src_shape.head_dim *
                             static_cast<int64_t>(DTypeBytes(src_shape.dtype));
  const int64_t chunk_bytes = head_bytes * slab.num_kv_heads();
  const int64_t src_block_bytes = static_cast<int64_t>(src_shape.BlockBytes());
  const int64_t dst_block_bytes = static_cast<int64_t>(dst_shape.BlockBytes());
  // Offset of (layer, kv, head) inside a block of `shape`.
  const auto offset_in_block = [head_bytes](const KvPoolShape& shape, int layer, int kv,
                                            int head) {
    return ((static_cast<int64_t>(layer) * 2 + kv) * shape.num_kv_heads + head) * head_bytes;
  };

  std::vector<KvByteRange> ranges;
  for (size_t i = 0; i < src_blocks.size(); ++i) {
    const int64_t src_block_start = src_blocks[i] * src_block_bytes;
    const int64_t dst_block_start = dst_blocks[i] * dst_block_bytes;
    for (int l = 0; l < slab.num_layers(); ++l) {
      for (int kv = 0; kv < 2; ++kv) {
        const int64_t src_offset =
            src_block_start +
            offset_in_block(src_shape, slab.src_layer_idx + l, kv, slab.src_kv_head_idx);
        const int64_t dst_offset =
            dst_block_start +
            offset_in_block(dst_shape, slab.dst_layer_idx + l, kv, slab.dst_kv_head_idx);
        if (!ranges.empty()) {
          KvByteRange& last = ranges.back();
          if (last.src_offset + last.num_bytes == src_offset &&
              last.dst_offset + last.num_bytes == dst_offset) {
            last.num_bytes += chunk_bytes;
            continue;
          }
        }
        ranges.push_back(KvByteRange{
            .src_offset = src_offset, .dst_offset = dst_offset, .num_bytes = chunk_bytes});
      }
    }
  }
  return ranges;
}

KvSlab WholePoolSlab(const KvPoolShape& shape) {
  return KvSlab{.src_rank_idx = 0,
                .layer_begin = 0,
                .layer_end = shape.num_layers,
                .kv_head_begin = 0,
                .kv_head_end = shape.num_kv_heads};
}

KvPoolShape PackedSlabShape(const KvSlab& slab, const KvPoolShape& pool_shape) {
  return KvPoolShape{.num_layers = slab.num_layers(),
                     .num_kv_heads = slab.num_kv_heads(),
                     .head_dim = pool_shape.head_dim,
                     .block_size = pool_shape.block_size,
                     .dtype = pool_shape.dtype};
}

std::vector<KvByteRange> PackedSlabByteRanges(const KvPoolShape& src_shape, const KvSlab& slab,
                                              BlockId src_start, int num_blocks) {
  KvSlab packed = slab;
  packed.dst_layer_idx = 0;
  packed.dst_kv_head_idx = 0;
  std::vector<BlockId> src_blocks(num_blocks);
  std::vector<BlockId> dst_blocks(num_blocks);
  std::iota(src_blocks.begin(), src_blocks.end(), src_start);
  std::iota(dst_blocks.begin(), dst_blocks.end(), 0);
  return SlabByteRanges(src_shape, PackedSlabShape(slab, src_shape), packed, src_blocks,
                        dst_blocks);
}

void CopyByteRanges(const std::byte* src_base, std::byte* dst_base,
                    std::span<const KvByteRange> ranges) {
  for (const KvByteRange& range : ranges) {
    std::memcpy(dst_base + range.dst_offset, src_base + range.src_offset,
                static_cast<size_t>(range.num_bytes));
  }
}

int64_t TotalBytes(std::span<const KvByteRange> ranges) {
  int64_t total = 0;
  for (const KvByteRange& range : ranges) total += range.num_bytes;
  return total;
}

}  // namespace baton::runtime
