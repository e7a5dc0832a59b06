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

TEST(ModelShardTest, RejectsShardsThatDoNotDivide) {
  EXPECT_THAT(MakeModelShard(Config(), ShardSpec{.tp_size = 4}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_kv_heads 2")));
  EXPECT_THAT(MakeModelShard(Config(), ShardSpec{.pp_size = 7}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("7 pipeline stages")));
  EXPECT_THAT(MakeModelShard(Config(), ShardSpec{.tp_rank = 2, .tp_size = 2}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("out of range")));
}

}  // namespace
}  // namespace baton::runtime
