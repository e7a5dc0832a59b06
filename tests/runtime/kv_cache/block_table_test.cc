#include "runtime/kv_cache/block_table.h"

#include <cstddef>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/kv_cache/kv_pool.h"

namespace baton::runtime {
namespace {

TEST(BlockTableTest, ReplaceBlocksKeepsTheTokens) {
  BlockTable table(/*block_size=*/4);
  table.AddBlocks({7, 2});
  table.AppendTokens(6);
  EXPECT_THAT(table.ReplaceBlocks({0, 1}), ::testing::ElementsAre(7, 2));
  EXPECT_THAT(table.blocks(), ::testing::ElementsAre(0, 1));
  EXPECT_EQ(table.num_tokens(), 6);
  EXPECT_EQ(table.SlotOf(5), 1 * 4 + 1);
  EXPECT_DEATH(table.ReplaceBlocks({3}), "size");
}

TEST(BlockTableTest, GrowsBlockByBlockAndMapsSlots) {
  BlockTable table(/*block_size=*/4);
  EXPECT_EQ(table.NumBlocksToAppend(1), 1);
  EXPECT_EQ(table.NumBlocksToAppend(9), 3);
  table.AddBlocks({7, 2, 5});
  table.AppendTokens(9);
  EXPECT_EQ(table.num_tokens(), 9);
  EXPECT_EQ(table.NumBlocksToAppend(3), 0);
  EXPECT_EQ(table.NumBlocksToAppend(4), 1);
  EXPECT_EQ(table.SlotOf(0), 7 * 4 + 0);
  EXPECT_EQ(table.SlotOf(5), 2 * 4 + 1);
  EXPECT_EQ(table.SlotOf(8), 5 * 4 + 0);
  EXPECT_THAT(table.TakeBlocks(), ::testing::ElementsAre(7, 2, 5));
  EXPECT_EQ(table.num_tokens(), 0);
  EXPECT_TRUE(table.blocks().empty());
}

TEST(BlockTableTest, NumBlocksForRoundsUp) {
  EXPECT_EQ(NumBlocksFor(0, 16), 0);
  EXPECT_EQ(NumBlocksFor(1, 16), 1);
  EXPECT_EQ(NumBlocksFor(16, 16), 1);
  EXPECT_EQ(NumBlocksFor(17, 16), 2);
}

class KvPoolDtypeTest : public ::testing::TestWithParam<DType> {};

TEST_P(KvPoolDtypeTest, LayerViewsTileEachBlockWithoutOverlap) {
  const DType dtype = GetParam();
  const int64_t elem_bytes = static_cast<int64_t>(DTypeBytes(dtype));
  const KvPoolShape shape{
      .num_layers = 3, .num_kv_heads = 2, .head_dim = 4, .block_size = 5, .dtype = dtype};
  auto pool = KvPool::Create(shape, /*num_blocks=*/6);
  ASSERT_TRUE(pool.ok()) << pool.status();
  const int64_t side = 5 * 2 * 4;
  EXPECT_EQ((*pool)->BlockBytes(), static_cast<size_t>(3 * 2 * side * elem_bytes));
  for (int layer = 0; layer < 3; ++layer) {
    const auto view = (*pool)->LayerView(layer);
    EXPECT_EQ(view.dtype, dtype);
    EXPECT_EQ(view.block_stride, 3 * 2 * side);
    const auto* k = static_cast<std::byte*>(view.k);
    EXPECT_EQ(static_cast<std::byte*>(view.v) - k, side * elem_bytes);
    // Layer l of block b sits inside block b's byte range.
    for (BlockId b : {0, 5}) {
      const std::byte* k_begin = k + b * view.block_stride * elem_bytes;
      EXPECT_GE(k_begin, (*pool)->BlockData(b));
      EXPECT_LT(k_begin, (*pool)->BlockData(b) + (*pool)->BlockBytes());
    }
  }
  EXPECT_EQ(KvPool::NumBlocksForBudget(shape, (*pool)->BlockBytes() * 10 + 7), 10);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, KvPoolDtypeTest, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

TEST(KvPoolTest, RejectsAnF16Cache) {
  const KvPoolShape shape{
      .num_layers = 1, .num_kv_heads = 1, .head_dim = 4, .block_size = 4, .dtype = DType::kF16};
  auto pool = KvPool::Create(shape, 2);
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pool.status().message(), ::testing::HasSubstr("f16"));
}

// A pool in device storage (a GPU backend's allocation) lays its blocks out in that memory and
// neither maps nor frees it.
TEST(KvPoolTest, DeviceStorageHoldsTheBlocksInTheCallersMemory) {
  const KvPoolShape shape{.num_layers = 2, .num_kv_heads = 2, .head_dim = 4, .block_size = 4};
  std::vector<std::byte> storage(shape.BlockBytes() * 3);
  auto pool = KvPool::Create(shape, 3, KvPoolOptions{.device_storage = storage.data()});
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_TRUE((*pool)->on_device());
  EXPECT_EQ((*pool)->BlockData(0), storage.data());
  EXPECT_EQ((*pool)->BlockData(2), storage.data() + 2 * shape.BlockBytes());
  EXPECT_EQ(reinterpret_cast<std::byte*>((*pool)->LayerView(1).k),
            storage.data() + shape.BlockBytes() / 2);
  auto shared = KvPool::Create(
      shape, 3, KvPoolOptions{.shm_name = "/baton-test-device", .device_storage = storage.data()});
  EXPECT_EQ(shared.status().code(), absl::StatusCode::kInvalidArgument);
  auto host = KvPool::Create(shape, 3);
  ASSERT_TRUE(host.ok());
  EXPECT_FALSE((*host)->on_device());
}

TEST(KvPoolTest, RejectsInvalidShape) {
  auto pool = KvPool::Create(KvPoolShape{.num_layers = 0, .num_kv_heads = 1, .head_dim = 1}, 1);
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace baton::runtime
