// The byte-range arithmetic of a KV slab copy (kv_slab_copy.h), as a table: head-major blocks
// [layer][K, V][kv_head][slot][dim], ranges merged only where both sides continue.
#include "runtime/transfer/kv_slab_copy.h"

#include <ostream>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/kv_cache/block_runs.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {

void PrintTo(const KvByteRange& r, std::ostream* os) {
  *os << "{src " << r.src_offset << ", dst " << r.dst_offset << ", bytes " << r.num_bytes << "}";
}

namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// head_dim 2, block_size 2: one KV head of one layer's K (or V) in a block is 2 x 2 x 4 = 16 bytes
// (f32), 8 (bf16).
KvPoolShape Shape(int num_layers, int num_kv_heads, DType dtype = DType::kF32) {
  return KvPoolShape{.num_layers = num_layers, .num_kv_heads = num_kv_heads, .head_dim = 2,
                     .block_size = 2, .dtype = dtype};
}

KvPoolShape Bf16Shape(int num_layers, int num_kv_heads) {
  return Shape(num_layers, num_kv_heads, DType::kBF16);
}

// Source-local (layer, head), destination-local (layer, head), and the slab's size.
KvSlab Slab(int src_layer, int src_head, int dst_layer, int dst_head, int num_layers,
            int num_heads) {
  return KvSlab{.src_rank_idx = 0, .layer_begin = 0, .layer_end = num_layers, .kv_head_begin = 0,
                .kv_head_end = num_heads, .src_layer_idx = src_layer, .src_kv_head_idx = src_head,
                .dst_layer_idx = dst_layer, .dst_kv_head_idx = dst_head};
}

struct Case {
  const char* what;
  KvPoolShape src;
  KvPoolShape dst;
  KvSlab slab;
  std::vector<BlockId> src_blocks;
  std::vector<BlockId> dst_blocks;
  std::vector<KvByteRange> ranges;
};

std::vector<Case> Cases() {
  // Block bytes: Shape(2, 2) 128, Shape(2, 1) 64, Shape(1, 2) 64.
  return {
      {"same shape, whole pool, one run: one range", Shape(2, 2), Shape(2, 2), Slab(0, 0, 0, 0, 2, 2),
       {3, 4, 5}, {0, 1, 2}, {{384, 0, 384}}},
      {"same shape, whole pool, two runs: two ranges", Shape(2, 2), Shape(2, 2),
       Slab(0, 0, 0, 0, 2, 2), {3, 5}, {0, 1}, {{384, 0, 128}, {640, 128, 128}}},
      {"tp1 -> tp2 rank 1: head 1 of 2 per layer and K/V", Shape(2, 2), Shape(2, 1),
       Slab(0, 1, 0, 0, 2, 1), {0}, {0}, {{16, 0, 16}, {48, 16, 16}, {80, 32, 16}, {112, 48, 16}}},
      {"tp2 rank 0 -> tp1: contiguous on the source only", Shape(2, 1), Shape(2, 2),
       Slab(0, 0, 0, 0, 2, 1), {0, 1}, {0, 1},
       {{0, 0, 16}, {16, 32, 16}, {32, 64, 16}, {48, 96, 16},
        {64, 128, 16}, {80, 160, 16}, {96, 192, 16}, {112, 224, 16}}},
      {"tp2 rank 1 -> tp1 into scattered blocks", Shape(2, 1), Shape(2, 2), Slab(0, 0, 0, 1, 1, 1),
       {7}, {2}, {{448, 272, 16}, {464, 304, 16}}},
      {"pp: all heads of one layer: K and V merge, blocks do not", Shape(2, 2), Shape(1, 2),
       Slab(1, 0, 0, 0, 1, 2), {2, 3}, {1, 2}, {{320, 64, 64}, {448, 128, 64}}},
      {"pp: all heads, both layers of the source, into layer 1 of 2", Shape(1, 2), Shape(2, 2),
       Slab(0, 0, 1, 0, 1, 2), {0, 1}, {0, 1}, {{0, 64, 64}, {64, 192, 64}}},
      {"all heads, all layers of both, scattered blocks: one range per block", Shape(2, 2),
       Shape(2, 2), Slab(0, 0, 0, 0, 2, 2), {9, 4}, {1, 0}, {{1152, 128, 128}, {512, 0, 128}}},
      {"no blocks: no ranges", Shape(2, 2), Shape(2, 1), Slab(0, 1, 0, 0, 2, 1), {}, {}, {}},
      // bf16: every offset and size of the f32 cases above, halved (block bytes 64 and 32).
      {"bf16: same shape, whole pool, two runs: two ranges", Bf16Shape(2, 2), Bf16Shape(2, 2),
       Slab(0, 0, 0, 0, 2, 2), {3, 5}, {0, 1}, {{192, 0, 64}, {320, 64, 64}}},
      {"bf16: tp1 -> tp2 rank 1: head 1 of 2 per layer and K/V", Bf16Shape(2, 2), Bf16Shape(2, 1),
       Slab(0, 1, 0, 0, 2, 1), {0}, {0}, {{8, 0, 8}, {24, 8, 8}, {40, 16, 8}, {56, 24, 8}}},
      {"bf16: tp2 rank 1 -> tp1 into scattered blocks", Bf16Shape(2, 1), Bf16Shape(2, 2),
       Slab(0, 0, 0, 1, 1, 1), {7}, {2}, {{224, 136, 8}, {232, 152, 8}}},
      {"bf16: pp: all heads of one layer", Bf16Shape(2, 2), Bf16Shape(1, 2),
       Slab(1, 0, 0, 0, 1, 2), {2, 3}, {1, 2}, {{160, 32, 32}, {224, 64, 32}}},
  };
}

TEST(KvSlabCopyTest, ByteRangesTable) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.what);
    ASSERT_THAT(CheckSlabFits(c.src, c.dst, c.slab), IsOk());
    const std::vector<KvByteRange> ranges =
        SlabByteRanges(c.src, c.dst, c.slab, c.src_blocks, c.dst_blocks);
    EXPECT_THAT(ranges, ElementsAreArray(c.ranges));
    const int64_t slab_block_bytes = int64_t{c.slab.num_layers()} * c.slab.num_kv_heads() * 2 *
                                     c.src.block_size * c.src.head_dim *
                                     static_cast<int64_t>(DTypeBytes(c.src.dtype));
    EXPECT_EQ(TotalBytes(ranges), slab_block_bytes * static_cast<int64_t>(c.src_blocks.size()));
  }
}

TEST(KvSlabCopyTest, WholeSameShapeSlabCoalescesLikeBlockRuns) {
  const KvPoolShape shape{.num_layers = 3, .num_kv_heads = 4, .head_dim = 8, .block_size = 16};
  const std::vector<BlockId> src = {0, 1, 2, 7, 8, 3, 10, 11, 12, 13};
  const std::vector<BlockId> dst = {5, 6, 7, 8, 9, 0, 1, 2, 4, 3};
  const std::vector<KvByteRange> ranges = SlabByteRanges(shape, shape, Slab(0, 0, 0, 0, 3, 4), src, dst);
  const std::vector<BlockRun> runs = CoalesceBlockRuns(src, dst);
  ASSERT_EQ(ranges.size(), runs.size());
  const int64_t block_bytes = static_cast<int64_t>(shape.BlockBytes());
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(ranges[i], (KvByteRange{.src_offset = runs[i].src_start * block_bytes,
                                      .dst_offset = runs[i].dst_start * block_bytes,
                                      .num_bytes = runs[i].num_blocks * block_bytes}));
  }
}

TEST(KvSlabCopyTest, PackedRangesAreTheWireOrderFromTheSource) {
  // Layer 1 x head 1 of blocks 3..4 of Shape(2, 2) (block bytes 128, one head 16): K at 80, V at
  // 112 inside a block; the packed stream has them back to back.
  EXPECT_THAT(PackedSlabByteRanges(Shape(2, 2), Slab(1, 1, 7, 7, 1, 1), 3, 2),
              ElementsAreArray(std::vector<KvByteRange>{
                  {464, 0, 16}, {496, 16, 16}, {592, 32, 16}, {624, 48, 16}}));
  // Both heads of layer 1: K and V continue each other in the source, one range per block.
  EXPECT_THAT(PackedSlabByteRanges(Shape(2, 2), Slab(1, 0, 0, 0, 1, 2), 0, 2),
              ElementsAreArray(std::vector<KvByteRange>{{64, 0, 64}, {192, 64, 64}}));
  EXPECT_EQ(PackedSlabShape(Slab(1, 0, 0, 0, 1, 2), Shape(2, 2)), Shape(1, 2));
  // The whole pool: one range per run, as the blocks lie.
  EXPECT_THAT(PackedSlabByteRanges(Shape(2, 2), WholePoolSlab(Shape(2, 2)), 5, 3),
              ElementsAreArray(std::vector<KvByteRange>{{640, 0, 384}}));
  // A bf16 pool packs into a bf16 stream: the same ranges at half the bytes.
  EXPECT_EQ(PackedSlabShape(Slab(1, 0, 0, 0, 1, 2), Bf16Shape(2, 2)), Bf16Shape(1, 2));
  EXPECT_THAT(PackedSlabByteRanges(Bf16Shape(2, 2), Slab(1, 1, 7, 7, 1, 1), 3, 2),
              ElementsAreArray(std::vector<KvByteRange>{
                  {232, 0, 8}, {248, 8, 8}, {296, 16, 8}, {312, 24, 8}}));
}

TEST(KvSlabCopyTest, CheckSlabFitsNamesWhatDoesNotFit) {
  EXPECT_THAT(CheckSlabFits(Shape(2, 2), Shape(2, 1), Slab(0, 1, 0, 0, 2, 1)), IsOk());
  KvPoolShape other = Shape(2, 2);
  other.head_dim = 4;
  EXPECT_THAT(CheckSlabFits(Shape(2, 2), other, Slab(0, 0, 0, 0, 1, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("head_dim")));
  other = Shape(2, 2);
  other.block_size = 4;
  EXPECT_THAT(CheckSlabFits(Shape(2, 2), other, Slab(0, 0, 0, 0, 1, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("block_size")));
  EXPECT_THAT(CheckSlabFits(Shape(2, 2), Shape(2, 2), Slab(0, 0, 0, 0, 0, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty slab")));
  EXPECT_THAT(CheckSlabFits(Shape(2, 1), Shape(2, 2), Slab(0, 1, 0, 0, 1, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("source")));
  EXPECT_THAT(CheckSlabFits(Shape(2, 2), Shape(1, 2), Slab(0, 0, 0, 0, 2, 2)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("destination")));
  EXPECT_THAT(CheckSlabFits(Shape(2, 2), Shape(2, 2), Slab(-1, 0, 0, 0, 1, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("source")));
}

TEST(KvSlabCopyTest, PoolsOfDifferentDtypesAreInvalidArgumentNamingBoth) {
  EXPECT_THAT(CheckSlabFits(Bf16Shape(2, 2), Bf16Shape(2, 1), Slab(0, 1, 0, 0, 2, 1)), IsOk());
  // Same layers, heads, head_dim and block_size: only the element type differs.
  EXPECT_THAT(CheckSlabFits(Shape(2, 2), Bf16Shape(2, 2), WholePoolSlab(Shape(2, 2))),
              StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("source pool holds f32"),
                                                                 HasSubstr("destination holds bf16"))));
  EXPECT_THAT(CheckSlabFits(Bf16Shape(2, 2), Shape(2, 1), Slab(0, 1, 0, 0, 2, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("source pool holds bf16"),
                                                                 HasSubstr("destination holds f32"))));
}

}  // namespace
}  // namespace baton::runtime
