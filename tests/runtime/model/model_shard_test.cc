#include "runtime/model/model_shard.h"

#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;

ModelConfig Config() {
  ModelConfig config;
  config.num_layers = 6;
  config.num_heads = 8;
  config.num_kv_heads = 2;
  config.intermediate_size = 64;
  config.vocab_size = 100;
  return config;
}

TEST(ModelShardTest, WholeModelByDefault) {
  auto shard = MakeModelShard(Config(), ShardSpec{});
  ASSERT_THAT(shard, IsOk());
  EXPECT_TRUE(shard->spec.IsWholeModel());
  EXPECT_EQ(shard->layer_begin, 0);
  EXPECT_EQ(shard->layer_end, 6);
  EXPECT_EQ(shard->num_heads, 8);
  EXPECT_EQ(shard->num_kv_heads, 2);
  EXPECT_EQ(shard->intermediate_size, 64);
}

TEST(ModelShardTest, SplitsHeadsOverTpAndLayersOverPp) {
  // 6 layers over 4 stages: 2, 2, 1, 1.
  const std::vector<std::pair<int, int>> expected = {{0, 2}, {2, 4}, {4, 5}, {5, 6}};
  for (int pp_rank = 0; pp_rank < 4; ++pp_rank) {
    auto shard = MakeModelShard(Config(), ShardSpec{.tp_rank = 1, .tp_size = 2,
                                                    .pp_rank = pp_rank, .pp_size = 4});
    ASSERT_THAT(shard, IsOk());
    EXPECT_EQ(shard->layer_begin, expected[pp_rank].first) << pp_rank;
    EXPECT_EQ(shard->layer_end, expected[pp_rank].second) << pp_rank;
    EXPECT_EQ(shard->num_heads, 4);
    EXPECT_EQ(shard->num_kv_heads, 1);
    EXPECT_EQ(shard->intermediate_size, 32);
  }
}

TEST(ModelShardTest, HeadRangesTable) {
  struct Case {
    const char* what;
    int num_heads, num_kv_heads, tp_size, tp_rank;
    IndexRange heads, kv_heads;
  };
  const std::vector<Case> cases = {
      {"whole model", 8, 2, 1, 0, {0, 8}, {0, 2}},
      {"tp2 splits kv heads", 8, 2, 2, 1, {4, 8}, {1, 2}},
      {"tp2 of 4 kv heads", 8, 4, 2, 1, {4, 8}, {2, 4}},
      {"tp4 replicates 2 kv heads, rank 0", 8, 2, 4, 0, {0, 2}, {0, 1}},
      {"tp4 replicates 2 kv heads, rank 1", 8, 2, 4, 1, {2, 4}, {0, 1}},
      {"tp4 replicates 2 kv heads, rank 2", 8, 2, 4, 2, {4, 6}, {1, 2}},
      {"tp4 replicates 2 kv heads, rank 3", 8, 2, 4, 3, {6, 8}, {1, 2}},
      {"tp8 of 1 kv head (MQA)", 8, 1, 8, 5, {5, 6}, {0, 1}},
      {"tp4 of 8 kv heads (MHA)", 8, 8, 4, 3, {6, 8}, {6, 8}},
  };
  for (const Case& c : cases) {
    ModelConfig config = Config();
    config.num_heads = c.num_heads;
    config.num_kv_heads = c.num_kv_heads;
    auto shard = MakeModelShard(config, ShardSpec{.tp_rank = c.tp_rank, .tp_size = c.tp_size});
    ASSERT_THAT(shard, IsOk()) << c.what;
    EXPECT_EQ((IndexRange{shard->head_begin, shard->head_end}), c.heads) << c.what;
    EXPECT_EQ((IndexRange{shard->kv_head_begin, shard->kv_head_end}), c.kv_heads) << c.what;
    EXPECT_EQ(shard->num_heads, c.heads.size()) << c.what;
    EXPECT_EQ(shard->num_kv_heads, c.kv_heads.size()) << c.what;
    // Every query head's GQA group is one of the rank's KV heads.
    const int group_size = c.num_heads / c.num_kv_heads;
    for (int q = shard->head_begin; q < shard->head_end; ++q) {
      EXPECT_GE(q / group_size, shard->kv_head_begin) << c.what << " head " << q;
      EXPECT_LT(q / group_size, shard->kv_head_end) << c.what << " head " << q;
    }
  }
}

TEST(ModelShardTest, KvHeadReplicas) {
  EXPECT_EQ(KvHeadReplicas(2, 1), 1);
  EXPECT_EQ(KvHeadReplicas(2, 2), 1);
  EXPECT_EQ(KvHeadReplicas(2, 4), 2);
  EXPECT_EQ(KvHeadReplicas(1, 8), 8);
}

TEST(ModelShardTest, StageLayerRangeTable) {
  struct Case {
    const char* what;
    int num_layers, pp_size;
    std::vector<int> split;
    std::vector<IndexRange> stages;  // expected, one per pp_rank
  };
  const std::vector<Case> cases = {
      {"one stage", 5, 1, {}, {{0, 5}}},
      {"balanced 5 over 2", 5, 2, {}, {{0, 3}, {3, 5}}},
      {"balanced 5 over 3", 5, 3, {}, {{0, 2}, {2, 4}, {4, 5}}},
      {"balanced 6 over 3", 6, 3, {}, {{0, 2}, {2, 4}, {4, 6}}},
      {"explicit 1 + 4", 5, 2, {1, 4}, {{0, 1}, {1, 5}}},
      {"explicit 3 + 1 + 2", 6, 3, {3, 1, 2}, {{0, 3}, {3, 4}, {4, 6}}},
  };
  for (const Case& c : cases) {
    for (int pp_rank = 0; pp_rank < c.pp_size; ++pp_rank) {
      auto range = StageLayerRange(c.num_layers, c.pp_size, pp_rank, c.split);
      ASSERT_THAT(range, IsOk()) << c.what;
      EXPECT_EQ(*range, c.stages[pp_rank]) << c.what << " stage " << pp_rank;
      ModelConfig config = Config();
      config.num_layers = c.num_layers;
      auto shard = MakeModelShard(
          config, ShardSpec{.pp_rank = pp_rank, .pp_size = c.pp_size, .stage_num_layers = c.split});
      ASSERT_THAT(shard, IsOk()) << c.what;
      EXPECT_EQ((IndexRange{shard->layer_begin, shard->layer_end}), c.stages[pp_rank]) << c.what;
    }
  }
}

// Uneven vocab ranges: the first vocab_size % tp_size ranks take one row more, none is empty, and
// the ranges tile [0, vocab_size) in rank order.
TEST(ModelShardTest, TpVocabRangeTable) {
  struct Case {
    int vocab_size, tp_size;
    std::vector<IndexRange> ranks;
  };
  const std::vector<Case> cases = {
      {100, 1, {{0, 100}}},
      {100, 2, {{0, 50}, {50, 100}}},
      {97, 2, {{0, 49}, {49, 97}}},
      {97, 4, {{0, 25}, {25, 49}, {49, 73}, {73, 97}}},
      {5, 4, {{0, 2}, {2, 3}, {3, 4}, {4, 5}}},
      {4, 4, {{0, 1}, {1, 2}, {2, 3}, {3, 4}}},
  };
  for (const Case& c : cases) {
    for (int r = 0; r < c.tp_size; ++r) {
      auto range = TpVocabRange(c.vocab_size, c.tp_size, r);
      ASSERT_THAT(range, IsOk());
      EXPECT_EQ(*range, c.ranks[r]) << c.vocab_size << " over " << c.tp_size << ", rank " << r;
    }
  }
  EXPECT_THAT(TpVocabRange(3, 4, 0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("vocab_size 3 cannot be split over 4 tp ranks")));
  EXPECT_THAT(TpVocabRange(8, 4, 4), StatusIs(absl::StatusCode::kInvalidArgument));
}

// The shard's vocab rows: its TpVocabRange when vocab-parallel with tp > 1, else every row.
TEST(ModelShardTest, VocabRowsFollowTheOption) {
  ModelConfig config = Config();
  config.vocab_size = 97;
  auto parallel = MakeModelShard(config, ShardSpec{.tp_rank = 1, .tp_size = 2});
  ASSERT_THAT(parallel, IsOk());
  EXPECT_TRUE(parallel->vocab_parallel);
  EXPECT_EQ((IndexRange{parallel->vocab_begin, parallel->vocab_end}), (IndexRange{49, 97}));
  EXPECT_EQ(parallel->num_vocab_rows(), 48);
  auto replicated =
      MakeModelShard(config, ShardSpec{.tp_rank = 1, .tp_size = 2, .vocab_parallel = false});
  ASSERT_THAT(replicated, IsOk());
  EXPECT_FALSE(replicated->vocab_parallel);
  EXPECT_EQ((IndexRange{replicated->vocab_begin, replicated->vocab_end}), (IndexRange{0, 97}));
  auto one_rank = MakeModelShard(config, ShardSpec{});  // the option means nothing at tp 1
  ASSERT_THAT(one_rank, IsOk());
  EXPECT_FALSE(one_rank->vocab_parallel);
  EXPECT_EQ(one_rank->num_vocab_rows(), 97);
  // The layout carries the option to every rank's spec, and names it when it is off.
  ParallelLayout layout{.tp_size = 2, .pp_size = 1, .vocab_parallel = false};
  auto spec = ShardSpecOfRank(layout, 1);
  ASSERT_THAT(spec, IsOk());
  EXPECT_FALSE(spec->vocab_parallel);
  EXPECT_EQ(spec->layout(), layout);
  EXPECT_EQ(LayoutString(layout), "tp 2 x pp 1 replicated vocab");
  EXPECT_EQ(LayoutString({2, 1}), "tp 2 x pp 1");
}

TEST(ModelShardTest, ShardSpecOfRankIsStageMajor) {
  // tp 2 x pp 3: rank = pp_rank * 2 + tp_rank, as deployment_config.h orders devices.
  for (int rank_idx = 0; rank_idx < 6; ++rank_idx) {
    auto spec = ShardSpecOfRank({2, 3, {1, 2, 3}}, rank_idx);
    ASSERT_THAT(spec, IsOk());
    EXPECT_EQ(spec->tp_rank, rank_idx % 2);
    EXPECT_EQ(spec->pp_rank, rank_idx / 2);
    EXPECT_EQ(spec->tp_size, 2);
    EXPECT_EQ(spec->pp_size, 3);
    EXPECT_EQ(spec->stage_num_layers, (std::vector<int>{1, 2, 3}));
    EXPECT_EQ(spec->rank_idx(), rank_idx);
  }
  EXPECT_THAT(ShardSpecOfRank({2, 3}, 6),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank 6 of tp 2 x pp 3")));
  EXPECT_THAT(ShardSpecOfRank({2, 3}, -1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ShardSpecOfRank({0, 1}, 0), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ModelShardTest, RejectsShardsThatDoNotFit) {
  struct Case {
    const char* what;
    int num_heads, num_kv_heads, intermediate_size;
    ShardSpec spec;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"tp does not divide num_heads", 8, 2, 64, {.tp_size = 3},
       "tp_size 3 does not divide num_heads 8"},
      {"tp does not divide the MLP", 8, 2, 60, {.tp_size = 8}, "intermediate_size 60"},
      {"tp neither divides nor is a multiple of num_kv_heads", 12, 4, 48, {.tp_size = 6},
       "tp_size 6 neither divides nor is a multiple of num_kv_heads 4"},
      {"num_kv_heads does not divide num_heads", 8, 3, 64, {}, "num_kv_heads 3 does not divide"},
      {"more stages than layers", 8, 2, 64, {.pp_size = 7}, "7 pipeline stages for 6 layers"},
      {"tp rank out of range", 8, 2, 64, {.tp_rank = 2, .tp_size = 2}, "out of range"},
      {"pp rank out of range", 8, 2, 64, {.pp_rank = 2, .pp_size = 2}, "out of range"},
      {"split sums wrong", 8, 2, 64, {.pp_size = 2, .stage_num_layers = {2, 3}},
       "layer split [2, 3] sums to 5, the model has 6 layers"},
      {"split has an empty stage", 8, 2, 64, {.pp_size = 2, .stage_num_layers = {6, 0}},
       "stage 1 has 0 layers"},
      {"split has the wrong stage count", 8, 2, 64, {.pp_size = 2, .stage_num_layers = {6}},
       "has 1 stages, pp_size is 2"},
      {"fewer vocab rows than tp ranks", 8, 8, 64, {.tp_size = 8},
       "vocab_size 4 cannot be split over 8 tp ranks"},
  };
  for (const Case& c : cases) {
    ModelConfig config = Config();
    config.num_heads = c.num_heads;
    config.num_kv_heads = c.num_kv_heads;
    config.intermediate_size = c.intermediate_size;
    config.vocab_size = 4;
    EXPECT_THAT(MakeModelShard(config, c.spec),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.what;
  }
}

}  // namespace
}  // namespace baton::runtime
