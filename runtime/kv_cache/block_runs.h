// Coalescing of a block-to-block copy list into runs that are contiguous on both sides.
//
// A KvPool stores a block's layers contiguously, so blocks src..src+n-1 of one pool and
// dst..dst+n-1 of another are each one byte range of n * BlockBytes(): one run is one memcpy or one
// message segment.
#pragma once

#include <span>
#include <vector>

#include "runtime/kv_cache/block_allocator.h"

namespace baton::runtime {

struct BlockRun {
  BlockId src_start = 0;  // first source block
  BlockId dst_start = 0;  // first destination block
  int num_blocks = 0;     // >= 1
  bool operator==(const BlockRun&) const = default;
};

// Pre-condition: src.size() == dst.size(). Splits the pairs (src[i], dst[i]), in order, into
// maximal runs where both ids grow by exactly one from one pair to the next. Empty input gives no
// runs.
std::vector<BlockRun> CoalesceBlockRuns(std::span<const BlockId> src, std::span<const BlockId> dst);

}  // namespace baton::runtime
