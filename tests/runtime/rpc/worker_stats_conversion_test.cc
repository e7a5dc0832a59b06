// A worker's stats snapshot on the wire: the per-rank holdings the scheduler sees in heartbeats.
#include <cstdint>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/rpc/worker_service.h"

namespace baton::rpc {
namespace {

runtime::RankHoldings Holdings(int tp_rank, int pp_rank, int layer_begin, int layer_end,
                               int kv_head_begin, int kv_head_end, int64_t weight_bytes,
                               int64_t kv_block_bytes) {
  runtime::RankHoldings holdings;
  holdings.shard.spec = runtime::ShardSpec{.tp_rank = tp_rank, .tp_size = 2, .pp_rank = pp_rank,
                                           .pp_size = 2};
  holdings.shard.layer_begin = layer_begin;
  holdings.shard.layer_end = layer_end;
  holdings.shard.kv_head_begin = kv_head_begin;
  holdings.shard.kv_head_end = kv_head_end;
  holdings.weight_bytes = weight_bytes;
  holdings.kv_block_bytes = kv_block_bytes;
  return holdings;
}

TEST(WorkerStatsConversionTest, CarriesWhatEachRankHolds) {
  runtime::WorkerStatsSnapshot stats;
  stats.engine.num_blocks_total = 32;
  stats.num_requests_holding_kv = 2;
  stats.ranks = {Holdings(0, 0, 0, 3, 0, 1, 1000, 64), Holdings(1, 0, 0, 3, 1, 2, 1001, 64),
                 Holdings(0, 1, 3, 4, 0, 1, 500, 32), Holdings(1, 1, 3, 4, 1, 2, 501, 32)};
  v1::WorkerStats message;
  ToProto(stats, &message);
  EXPECT_EQ(message.num_kv_blocks_total(), 32);
  EXPECT_EQ(message.num_requests_holding_kv(), 2);
  ASSERT_EQ(message.ranks_size(), 4);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(message.ranks(r).rank_idx(), r);  // stage-major
  const v1::RankHoldings& last = message.ranks(3);
  EXPECT_EQ(last.layer_begin(), 3);
  EXPECT_EQ(last.layer_end(), 4);
  EXPECT_EQ(last.kv_head_begin(), 1);
  EXPECT_EQ(last.kv_head_end(), 2);
  EXPECT_EQ(last.weight_bytes(), 501);
  EXPECT_EQ(last.kv_block_bytes(), 32);
}

}  // namespace
}  // namespace baton::rpc
