#include "runtime/kv_cache/block_allocator.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::runtime {
namespace {

using ::testing::ElementsAre;

TEST(BlockAllocatorTest, AllocatesLowestIdsFirstAndCounts) {
  BlockAllocator allocator(8);
  EXPECT_EQ(allocator.num_blocks_free(), 8);
  auto blocks = allocator.Allocate(3);
  ASSERT_TRUE(blocks.ok());
  EXPECT_THAT(*blocks, ElementsAre(0, 1, 2));
  EXPECT_EQ(allocator.num_blocks_used(), 3);
  EXPECT_EQ(allocator.num_blocks_free(), 5);
  for (BlockId b : *blocks) EXPECT_EQ(allocator.refcount(b), 1);
}

TEST(BlockAllocatorTest, CanAllocateIsSideEffectFreeAndExhaustionIsAStatus) {
  BlockAllocator allocator(4);
  EXPECT_TRUE(allocator.CanAllocate(4));
  EXPECT_FALSE(allocator.CanAllocate(5));
  EXPECT_EQ(allocator.num_blocks_free(), 4);
  auto too_many = allocator.Allocate(5);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(too_many.status().message()), ::testing::HasSubstr("5 blocks requested"));
  EXPECT_EQ(allocator.num_blocks_free(), 4);
}

TEST(BlockAllocatorTest, RefcountedBlocksFreeOnLastRelease) {
  BlockAllocator allocator(2);
  auto blocks = allocator.Allocate(1);
  ASSERT_TRUE(blocks.ok());
  const BlockId b = (*blocks)[0];
  allocator.IncRef(b);
  allocator.Release(b);
  EXPECT_EQ(allocator.num_blocks_free(), 1);
  allocator.Release(b);
  EXPECT_EQ(allocator.num_blocks_free(), 2);
  EXPECT_EQ(allocator.refcount(b), 0);
}

TEST(BlockAllocatorTest, EveryBlockHandedOutOnceUntilReleased) {
  BlockAllocator allocator(64);
  std::set<BlockId> seen;
  for (int round = 0; round < 16; ++round) {
    auto blocks = allocator.Allocate(4);
    ASSERT_TRUE(blocks.ok());
    for (BlockId b : *blocks) EXPECT_TRUE(seen.insert(b).second) << "block " << b << " twice";
  }
  EXPECT_FALSE(allocator.CanAllocate(1));
  allocator.Release(std::vector<BlockId>{5, 9});
  auto again = allocator.Allocate(2);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(std::set<BlockId>(again->begin(), again->end()), (std::set<BlockId>{5, 9}));
}

TEST(BlockAllocatorDeathTest, DoubleFreeAborts) {
  BlockAllocator allocator(2);
  auto blocks = allocator.Allocate(1);
  ASSERT_TRUE(blocks.ok());
  allocator.Release((*blocks)[0]);
  EXPECT_DEATH(allocator.Release((*blocks)[0]), "check failed");
}

}  // namespace
}  // namespace baton::runtime
