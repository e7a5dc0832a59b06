// The prefix cache in the block allocator (block_allocator.h) and its block hashes (block_hash.h):
// the hash chain, the longest cached run, eviction order, and reference counts of shared blocks.
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/kv_cache/block_allocator.h"
#include "runtime/kv_cache/block_hash.h"

namespace baton::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<BlockHash> Hashes(const std::vector<int32_t>& tokens, int block_size = 2,
                              std::string_view salt = "model") {
  std::vector<BlockHash> hashes;
  ExtendBlockHashes(PrefixCacheRoot(salt), tokens, block_size, &hashes);
  return hashes;
}

TEST(BlockHashTest, ChainsOverEveryTokenBeforeTheBlock) {
  const auto a = Hashes({1, 2, 3, 4, 5});
  ASSERT_EQ(a.size(), 2u);  // the partial block [5] has no hash
  EXPECT_EQ(Hashes({1, 2, 3, 4}), a);
  const auto b = Hashes({9, 2, 3, 4});
  EXPECT_NE(b[0], a[0]);
  EXPECT_NE(b[1], a[1]) << "the same tokens after another prefix are another block";
  EXPECT_NE(Hashes({1, 2, 3, 4}, 2, "other model")[0], a[0]) << "the salt starts the chain";
  EXPECT_NE(Hashes({1, 2, 3, 4}, 4)[0], a[1]);
}

TEST(BlockHashTest, ExtendsWithoutRehashing) {
  std::vector<BlockHash> hashes;
  const BlockHash root = PrefixCacheRoot("m");
  std::vector<int32_t> tokens = {1, 2, 3};
  ExtendBlockHashes(root, tokens, 2, &hashes);
  ASSERT_EQ(hashes.size(), 1u);
  tokens.push_back(4);
  ExtendBlockHashes(root, tokens, 2, &hashes);
  EXPECT_EQ(hashes, Hashes({1, 2, 3, 4}, 2, "m"));
}

TEST(BlockHashTest, IsAFixedFunctionOfItsInput) {
  // The scheduler and the workers hash in different processes and builds: the value is pinned.
  EXPECT_EQ(HashBlock(0, std::vector<int32_t>{}), 0xaf5570f5a1810b7aull);  // SHA-256 of 8 zero bytes
}

TEST(PrefixCacheTest, FindsTheLongestLeadingRun) {
  BlockAllocator allocator(8);
  const auto hashes = Hashes({1, 2, 3, 4, 5, 6});
  auto blocks = *allocator.Allocate(3);
  EXPECT_TRUE(allocator.Cache(blocks[0], hashes[0]));
  EXPECT_TRUE(allocator.Cache(blocks[1], hashes[1]));
  EXPECT_THAT(allocator.FindCached(hashes), ElementsAre(blocks[0], blocks[1]));
  // A run stops at the first miss, even when later blocks are cached.
  EXPECT_TRUE(allocator.Cache(blocks[2], hashes[2]));
  const std::vector<BlockHash> gap = {hashes[0], 12345, hashes[2]};
  EXPECT_THAT(allocator.FindCached(gap), ElementsAre(blocks[0]));
  EXPECT_THAT(allocator.FindCached(Hashes({9, 9})), IsEmpty());
}

TEST(PrefixCacheTest, AHashNamesOneBlockAndABlockOneHash) {
  BlockAllocator allocator(4);
  auto blocks = *allocator.Allocate(2);
  EXPECT_TRUE(allocator.Cache(blocks[0], 7));
  EXPECT_FALSE(allocator.Cache(blocks[1], 7)) << "the same prefix computed twice: the copy stays private";
  EXPECT_FALSE(allocator.Cache(blocks[0], 8));
  EXPECT_EQ(allocator.num_blocks_cached(), 1);
  allocator.Release(blocks[1]);
  EXPECT_FALSE(allocator.IsCached(blocks[1]));
}

TEST(PrefixCacheTest, ReleasedCachedBlocksStayFreeAndFindable) {
  BlockAllocator allocator(4);
  auto blocks = *allocator.Allocate(2);
  allocator.Cache(blocks[0], 1);
  allocator.Release(blocks);
  EXPECT_EQ(allocator.num_blocks_free(), 4) << "a cached block no one holds counts as free";
  EXPECT_EQ(allocator.refcount(blocks[0]), 0);
  EXPECT_THAT(allocator.FindCached(std::vector<BlockHash>{1}), ElementsAre(blocks[0]));
  // A hit takes it back from eviction.
  allocator.IncRef(blocks[0]);
  EXPECT_EQ(allocator.refcount(blocks[0]), 1);
  EXPECT_EQ(allocator.num_blocks_free(), 3);
}

TEST(PrefixCacheTest, PlainFreeBlocksGoFirstThenTheLeastRecentlyReleased) {
  BlockAllocator allocator(6);
  auto a = *allocator.Allocate(2);  // 0 1
  auto b = *allocator.Allocate(2);  // 2 3
  for (int i = 0; i < 2; ++i) {
    allocator.Cache(a[i], 10 + i);
    allocator.Cache(b[i], 20 + i);
  }
  allocator.Release(b);  // released first: evicted first; a sequence's last block before its first
  allocator.Release(a);
  EXPECT_THAT(*allocator.Allocate(2), ElementsAre(4, 5)) << "plain free blocks before any eviction";
  EXPECT_EQ(allocator.num_blocks_cached(), 4);
  EXPECT_THAT(*allocator.Allocate(3), ElementsAre(b[1], b[0], a[1]));
  EXPECT_EQ(allocator.num_blocks_cached(), 1);
  EXPECT_THAT(allocator.FindCached(std::vector<BlockHash>{20}), IsEmpty()) << "evicted: its hash is gone";
  EXPECT_THAT(allocator.FindCached(std::vector<BlockHash>{10}), ElementsAre(a[0]));
}

TEST(PrefixCacheTest, AHitMovesABlockToTheBackOfTheEvictionOrder) {
  BlockAllocator allocator(2);
  auto blocks = *allocator.Allocate(2);
  allocator.Cache(blocks[0], 1);
  allocator.Cache(blocks[1], 2);
  allocator.Release(blocks[0]);
  allocator.Release(blocks[1]);
  allocator.IncRef(blocks[0]);  // used again, then released: now the most recent
  allocator.Release(blocks[0]);
  EXPECT_THAT(*allocator.Allocate(1), ElementsAre(blocks[1]));
}

TEST(PrefixCacheTest, SharedBlocksFreeOnlyWithTheirLastOwner) {
  BlockAllocator allocator(3);
  auto blocks = *allocator.Allocate(1);
  allocator.Cache(blocks[0], 5);
  allocator.IncRef(blocks[0]);  // a second sequence with the same prefix
  allocator.Release(blocks[0]);  // the first is cancelled
  EXPECT_EQ(allocator.refcount(blocks[0]), 1);
  EXPECT_EQ(allocator.num_blocks_free(), 2);
  EXPECT_THAT(*allocator.Allocate(2), ::testing::Not(::testing::Contains(blocks[0])))
      << "a held block is never evicted";
  allocator.Release(blocks[0]);
  EXPECT_EQ(allocator.num_blocks_free(), 1);
  EXPECT_THAT(*allocator.Allocate(1), ElementsAre(blocks[0]));
}

TEST(PrefixCacheTest, EventsSayWhatWasNamedAndEvictedInOrder) {
  using Event = BlockAllocator::CacheEvent;
  BlockAllocator allocator(2);
  EXPECT_TRUE(allocator.TakeCacheEvents().empty()) << "nothing is recorded until asked";
  allocator.RecordCacheEvents(8);
  auto blocks = *allocator.Allocate(2);
  allocator.Cache(blocks[0], 1);
  allocator.Cache(blocks[1], 2);
  allocator.Release(blocks);
  (void)allocator.Allocate(1);  // evicts 2, the last block of the sequence
  allocator.Cache(blocks[1], 3);
  const BlockAllocator::CacheEvents events = allocator.TakeCacheEvents();
  EXPECT_FALSE(events.reset);
  EXPECT_THAT(events.events, ElementsAre(Event{1, true}, Event{2, true}, Event{2, false}, Event{3, true}));
  EXPECT_TRUE(allocator.TakeCacheEvents().empty());
}

TEST(PrefixCacheTest, TooManyEventsBetweenTakesBecomeAReset) {
  BlockAllocator allocator(4);
  allocator.RecordCacheEvents(2);
  auto blocks = *allocator.Allocate(3);
  for (int i = 0; i < 3; ++i) allocator.Cache(blocks[i], 10 + i);
  const BlockAllocator::CacheEvents events = allocator.TakeCacheEvents();
  EXPECT_TRUE(events.reset);
  EXPECT_THAT(events.events, IsEmpty());
  EXPECT_THAT(allocator.CachedHashes(), ::testing::UnorderedElementsAre(10, 11, 12));
}

TEST(PrefixCacheDeathTest, IncRefOfAPlainFreeBlockAborts) {
  BlockAllocator allocator(2);
  EXPECT_DEATH(allocator.IncRef(0), "check failed");
}

}  // namespace
}  // namespace baton::runtime
