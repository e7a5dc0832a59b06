// The scheduler's index of the instances' prefix caches (prefix_index.h): events applied in order,
// a reset starting over, the longest leading run matched, a view grown past the instance's blocks
// dropped; and the prompt's hashes, the workers' own.
#include "scheduler/global/prefix_index.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::scheduler {
namespace {

using Events = runtime::BlockAllocator::CacheEvents;

Events Stored(std::vector<BlockHash> hashes, bool reset = false) {
  Events events{.reset = reset};
  for (BlockHash hash : hashes) events.events.push_back({.hash = hash, .stored = true});
  return events;
}

TEST(PrefixIndexTest, AppliesEventsInOrderAndMatchesTheLeadingRun) {
  PrefixIndex index;
  index.Apply("w", Stored({1, 2, 3}), 100);
  const std::vector<BlockHash> prompt = {1, 2, 3, 4};
  EXPECT_EQ(index.MatchedBlocks("w", prompt), 3);
  index.Apply("w", Events{.events = {{.hash = 2, .stored = false}, {.hash = 2, .stored = true},
                                     {.hash = 3, .stored = false}}},
              100);
  EXPECT_EQ(index.MatchedBlocks("w", prompt), 2) << "evicted then stored again: held; 3 evicted";
  EXPECT_EQ(index.MatchedBlocks("w", std::vector<BlockHash>{9, 1}), 0) << "a run starts at the first block";
  EXPECT_EQ(index.MatchedBlocks("other", prompt), 0);
}

TEST(PrefixIndexTest, AResetReplacesTheView) {
  PrefixIndex index;
  index.Apply("w", Stored({1, 2}), 100);
  index.Apply("w", Stored({7}, /*reset=*/true), 100);
  EXPECT_EQ(index.NumBlocks("w"), 1u);
  EXPECT_EQ(index.MatchedBlocks("w", std::vector<BlockHash>{1}), 0);
}

TEST(PrefixIndexTest, AViewLargerThanTheCacheIsDropped) {
  PrefixIndex index;
  index.Apply("w", Stored({1, 2, 3}), 2);  // removals were lost: the next reset refills it
  EXPECT_EQ(index.NumBlocks("w"), 0u);
  index.Apply("w", Stored({1}), 2);
  index.Forget("w");
  EXPECT_EQ(index.NumBlocks("w"), 0u);
}

TEST(PromptHashesTest, AreTheWorkersHashesPerSaltAndBlockSize) {
  PromptHashes prompt({5, 6, 7, 8, 9});
  std::vector<BlockHash> expected;
  runtime::ExtendBlockHashes(runtime::PrefixCacheRoot("m"), std::vector<int32_t>{5, 6, 7, 8, 9}, 2, &expected);
  EXPECT_THAT(prompt.For("m", 2), ::testing::ElementsAreArray(expected));
  EXPECT_EQ(prompt.For("m", 4).size(), 1u);
  EXPECT_NE(prompt.For("other", 2)[0], expected[0]);
  EXPECT_EQ(prompt.For("m", 2).data(), prompt.For("m", 2).data()) << "computed once";
}

}  // namespace
}  // namespace baton::scheduler
