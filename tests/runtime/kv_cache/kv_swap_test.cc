// Swap copies merged into runs (kv_swap.h), and a block table moved to another pool's blocks.
#include "runtime/kv_cache/kv_swap.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/kv_cache/block_table.h"

namespace baton::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(KvSwapTest, ConsecutiveCopiesMergeIntoRuns) {
  const std::vector<BlockCopy> copies = {{.src = 4, .dst = 0}, {.src = 5, .dst = 1},
                                         {.src = 6, .dst = 2}, {.src = 9, .dst = 3},
                                         {.src = 10, .dst = 7}, {.src = 11, .dst = 8}};
  EXPECT_THAT(CoalesceBlockCopies(copies),
              ElementsAre(BlockCopyRun{.src = 4, .dst = 0, .num_blocks = 3},
                          BlockCopyRun{.src = 9, .dst = 3, .num_blocks = 1},
                          BlockCopyRun{.src = 10, .dst = 7, .num_blocks = 2}));
  EXPECT_THAT(CoalesceBlockCopies({}), IsEmpty());
  // Descending ids never merge: a run is one forward copy.
  const std::vector<BlockCopy> descending = {{.src = 3, .dst = 3}, {.src = 2, .dst = 2}};
  EXPECT_EQ(CoalesceBlockCopies(descending).size(), 2u);
}

TEST(KvSwapTest, ReplaceBlocksKeepsTheTokens) {
  BlockTable table(/*block_size=*/4);
  table.AddBlocks({7, 2});
  table.AppendTokens(6);
  EXPECT_THAT(table.ReplaceBlocks({0, 1}), ElementsAre(7, 2));
  EXPECT_THAT(table.blocks(), ElementsAre(0, 1));
  EXPECT_EQ(table.num_tokens(), 6);
  EXPECT_EQ(table.SlotOf(5), 1 * 4 + 1);
  EXPECT_DEATH(table.ReplaceBlocks({3}), "size");
}

}  // namespace
}  // namespace baton::runtime
