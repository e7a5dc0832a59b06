#include "runtime/kv_cache/block_runs.h"

#include <ostream>
#include <vector>

#include "gtest/gtest.h"

namespace baton::runtime {

void PrintTo(const BlockRun& run, std::ostream* os) {
  *os << "{src " << run.src_start << ", dst " << run.dst_start << ", n " << run.num_blocks << "}";
}

namespace {

struct Case {
  const char* what;
  std::vector<BlockId> src;
  std::vector<BlockId> dst;
  std::vector<BlockRun> runs;  // expected
};

TEST(CoalesceBlockRunsTest, Table) {
  const std::vector<Case> cases = {
      {"empty", {}, {}, {}},
      {"single", {5}, {9}, {{5, 9, 1}}},
      {"contiguous both sides", {3, 4, 5, 6}, {10, 11, 12, 13}, {{3, 10, 4}}},
      {"contiguous source only", {3, 4, 5}, {10, 12, 11}, {{3, 10, 1}, {4, 12, 1}, {5, 11, 1}}},
      {"contiguous destination only", {7, 2, 3}, {0, 1, 2}, {{7, 0, 1}, {2, 1, 2}}},
      {"descending is not a run", {5, 4, 3}, {2, 1, 0}, {{5, 2, 1}, {4, 1, 1}, {3, 0, 1}}},
      {"two runs", {0, 1, 2, 8, 9}, {4, 5, 6, 0, 1}, {{0, 4, 3}, {8, 0, 2}}},
      {"runs meet but ids jump", {0, 1, 2, 3}, {0, 1, 5, 6}, {{0, 0, 2}, {2, 5, 2}}},
      {"repeated source", {4, 4}, {0, 1}, {{4, 0, 1}, {4, 1, 1}}},
      {"swap copies", {4, 5, 6, 9, 10, 11}, {0, 1, 2, 3, 7, 8}, {{4, 0, 3}, {9, 3, 1}, {10, 7, 2}}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(CoalesceBlockRuns(c.src, c.dst), c.runs) << c.what;
  }
}

TEST(CoalesceBlockRunsTest, RunsCoverEveryPairInOrder) {
  const std::vector<BlockId> src = {9, 10, 11, 0, 1, 30, 31, 32, 33, 7};
  const std::vector<BlockId> dst = {2, 3, 4, 5, 6, 20, 21, 40, 41, 0};
  const std::vector<BlockRun> runs = CoalesceBlockRuns(src, dst);
  size_t i = 0;
  for (const BlockRun& run : runs) {
    ASSERT_GE(run.num_blocks, 1);
    for (int k = 0; k < run.num_blocks; ++k, ++i) {
      ASSERT_LT(i, src.size());
      EXPECT_EQ(run.src_start + k, src[i]);
      EXPECT_EQ(run.dst_start + k, dst[i]);
    }
  }
  EXPECT_EQ(i, src.size());
  EXPECT_EQ(runs.size(), 5u);  // {9..11->2..4}, {0,1->5,6}, {30,31->20,21}, {32,33->40,41}, {7->0}
}

}  // namespace
}  // namespace baton::runtime
