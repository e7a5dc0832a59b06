// KV hand-off between instances that shard the model differently: every decode rank pulls its
// slabs (kv_slab_mapping.h) from the prefill ranks' shared-memory pools (ShmTransport, and
// AutoKvTransport, which picks it on one host) and ends up with exactly the bytes a same-layout
// hand-off would give it; it moves exactly the bytes it owns and writes no other block.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/transfer/kv_segment_names.h"
#include "runtime/transfer/kv_slab_mapping.h"
#include "runtime/transfer/kv_transport.h"
#include "runtime/transfer/shm_transport.h"
#include "runtime/transfer/tcp_transport.h"
#include "runtime/transfer/transport_factory.h"
#include "tests/runtime/transfer/kv_test_pattern.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;
using transfer_testing::BlockHoldsPattern;
using transfer_testing::BlockListKind;
using transfer_testing::FillPool;
using transfer_testing::RandomBlockList;

constexpr int kPoolBlocks = 24;
constexpr int kRequestBlocks = 9;
constexpr uint32_t kSrcGarbageSeed = 100;  // + prefill rank: blocks outside the request
constexpr uint32_t kDstSeed = 200;         // + decode rank: what the destination held before

absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

// The KV word of (global layer, global KV head, token, dim, K/V): what any rank holding that layer
// and head stores there after a prefill, whatever the layout.
uint32_t KvWord(int layer, int kv_head, int token, int dim, int kv) {
  const uint64_t key = (uint64_t(layer) << 44) ^ (uint64_t(kv_head) << 34) ^
                       (uint64_t(token) << 13) ^ (uint64_t(dim) << 1) ^ uint64_t(kv);
  return transfer_testing::PatternWord(7, 0, key);
}

// Calls fn(element pointer, global layer, global head, token, dim, kv) for every element of
// `block` of `pool` (a pool of `shard`), the block being request block `request_block_idx`.
template <typename Fn>
void ForEachElement(const KvPool& pool, const KvRankShard& shard, BlockId block,
                    int request_block_idx, Fn fn) {
  const KvPoolShape& s = pool.shape();
  auto* data = reinterpret_cast<uint32_t*>(pool.BlockData(block));
  for (int l = 0; l < s.num_layers; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      for (int h = 0; h < s.num_kv_heads; ++h) {
        for (int slot = 0; slot < s.block_size; ++slot) {
          for (int d = 0; d < s.head_dim; ++d) {
            const int64_t idx = (((int64_t{l} * 2 + kv) * s.num_kv_heads + h) * s.block_size + slot) *
                                    s.head_dim + d;
            fn(data + idx, shard.layer_begin + l, shard.kv_head_begin + h,
               request_block_idx * s.block_size + slot, d, kv);
          }
        }
      }
    }
  }
}

struct Case {
  const char* name;
  KvPoolShape model;
  ParallelLayout prefill;
  ParallelLayout decode;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

KvPoolShape Model(int num_layers, int num_kv_heads) {
  return KvPoolShape{.num_layers = num_layers, .num_kv_heads = num_kv_heads, .head_dim = 4,
                     .block_size = 4};
}

ParallelLayout L(int tp_size, int pp_size, std::vector<int> stage_num_layers = {}) {
  return ParallelLayout{.tp_size = tp_size, .pp_size = pp_size,
                  .stage_num_layers = std::move(stage_num_layers)};
}

std::vector<Case> Cases() {
  return {
      {"P_tp2_to_D_tp1", Model(4, 2), L(2, 1), L(1, 1)},
      {"P_tp1_to_D_tp2", Model(4, 2), L(1, 1), L(2, 1)},
      {"P_pp2_to_D_tp2", Model(4, 2), L(1, 2), L(2, 1)},
      {"P_tp2pp2_to_D_pp2", Model(4, 4), L(2, 2), L(1, 2)},
      {"P_tp2pp2_to_D_tp4", Model(5, 4), L(2, 2), L(4, 1)},
      {"P_pp2_uneven_to_D_pp2_other_split", Model(5, 2), L(1, 2, {1, 4}), L(1, 2, {3, 2})},
      {"P_tp4_replicated_to_D_tp1", Model(3, 2), L(4, 1), L(1, 1)},
      {"P_tp4_replicated_to_D_tp2", Model(3, 2), L(4, 1), L(2, 1)},
      {"P_tp1_to_D_tp4_replicated", Model(3, 2), L(1, 1), L(4, 1)},
      {"P_tp4pp2_replicated_to_D_tp8pp1_replicated", Model(4, 2), L(4, 2), L(8, 1)},
      {"same_layout_tp2", Model(4, 2), L(2, 1), L(2, 1)},
      {"same_layout_tp1", Model(4, 2), L(1, 1), L(1, 1)},
  };
}

// The prefill instance: one shared pool per rank, each holding the request's KV (the pattern) in
// its own random block list, garbage elsewhere.
struct Prefill {
  std::vector<std::unique_ptr<KvPool>> pools;
  std::vector<KvRankSource> sources;
};

Prefill MakePrefill(const Case& c, int num_tokens, std::mt19937& rng) {
  Prefill prefill;
  for (int r = 0; r < c.prefill.num_ranks(); ++r) {
    absl::StatusOr<KvRankShard> shard = MakeKvRankShard(c.model, c.prefill, r);
    EXPECT_THAT(shard, IsOk());
    auto pool = KvPool::Create(shard->pool_shape, kPoolBlocks,
                               KvPoolOptions{.shm_name = NewKvSegmentName()});
    EXPECT_THAT(pool, IsOk());
    FillPool(**pool, kSrcGarbageSeed + r);
    const int num_blocks = (num_tokens + c.model.block_size - 1) / c.model.block_size;
    std::vector<BlockId> blocks = RandomBlockList(rng, kPoolBlocks, num_blocks, BlockListKind::kMixed);
    for (int i = 0; i < num_blocks; ++i) {
      ForEachElement(**pool, *shard, blocks[i], i, [](uint32_t* p, int l, int h, int t, int d, int kv) {
        *p = KvWord(l, h, t, d, kv);
      });
    }
    prefill.sources.push_back(KvRankSource{.source = LocalKvSource(**pool, ""),
                                           .shape = shard->pool_shape,
                                           .src_blocks = std::move(blocks)});
    prefill.pools.push_back(*std::move(pool));
  }
  return prefill;
}

// Every element of the request's blocks in `dst` equals KvWord; every other block still holds the
// destination's own pattern.
::testing::AssertionResult HoldsRequest(const KvPool& dst, const KvRankShard& shard,
                                        std::span<const BlockId> dst_blocks, uint32_t dst_seed) {
  std::vector<int> request_idx(dst.num_blocks(), -1);
  for (size_t i = 0; i < dst_blocks.size(); ++i) request_idx[dst_blocks[i]] = static_cast<int>(i);
  for (BlockId b = 0; b < dst.num_blocks(); ++b) {
    if (request_idx[b] < 0) {
      ::testing::AssertionResult untouched = BlockHoldsPattern(dst, b, dst_seed, b);
      if (!untouched) return untouched << " (should be untouched)";
      continue;
    }
    int64_t wrong = 0;
    std::string first;
    ForEachElement(dst, shard, b, request_idx[b], [&](uint32_t* p, int l, int h, int t, int d, int kv) {
      if (*p == KvWord(l, h, t, d, kv)) return;
      if (wrong++ == 0) {
        first = absl::StrCat("layer ", l, " head ", h, " token ", t, " dim ", d, " kv ", kv);
      }
    });
    if (wrong > 0) {
      return ::testing::AssertionFailure() << "destination block " << b << ": " << wrong
                                           << " wrong elements, first at " << first;
    }
  }
  return ::testing::AssertionSuccess();
}

class KvResliceTest : public ::testing::TestWithParam<Case> {};

TEST_P(KvResliceTest, EveryDecodeRankGetsExactlyTheBytesItOwns) {
  const Case& c = GetParam();
  absl::StatusOr<std::vector<std::vector<KvSlab>>> plan = MapKvSlabs(c.model, c.prefill, c.decode);
  ASSERT_THAT(plan, IsOk());
  std::mt19937 rng(13);
  const int num_tokens = kRequestBlocks * c.model.block_size - 3;  // last block partial
  Prefill prefill = MakePrefill(c, num_tokens, rng);
  ASSERT_FALSE(::testing::Test::HasFailure());

  ShmTransport shm;
  AutoKvTransport automatic;
  for (int d = 0; d < c.decode.num_ranks(); ++d) {
    SCOPED_TRACE(absl::StrCat("decode rank ", d));
    absl::StatusOr<KvRankShard> shard = MakeKvRankShard(c.model, c.decode, d);
    ASSERT_THAT(shard, IsOk());
    for (KvTransport* transport : {static_cast<KvTransport*>(&shm),
                                   static_cast<KvTransport*>(&automatic)}) {
      SCOPED_TRACE(transport->name());
      auto dst = KvPool::Create(shard->pool_shape, kPoolBlocks);
      ASSERT_THAT(dst, IsOk());
      FillPool(**dst, kDstSeed + d);
      const std::vector<BlockId> dst_blocks =
          RandomBlockList(rng, kPoolBlocks, kRequestBlocks, BlockListKind::kMixed);
      const KvPullSpec spec{.num_tokens = num_tokens,
                            .rank_sources = prefill.sources,
                            .slabs = (*plan)[d]};
      ShmTransport& counter = transport == &shm ? shm : automatic.shm();
      const int64_t bytes_before = counter.num_bytes_copied();
      ASSERT_THAT(transport->Pull(spec, **dst, dst_blocks, Soon()), IsOk());
      const int64_t bytes_moved = counter.num_bytes_copied() - bytes_before;
      EXPECT_EQ(bytes_moved, OwnedKvBytes(*shard).per_block_bytes * kRequestBlocks);
      EXPECT_EQ(bytes_moved, SlabKvBytes((*plan)[d], c.model).per_block_bytes * kRequestBlocks);
      EXPECT_TRUE(HoldsRequest(**dst, *shard, dst_blocks, kDstSeed + d));
    }
  }
  // The prefill pools were only read.
  for (int r = 0; r < c.prefill.num_ranks(); ++r) {
    const std::vector<BlockId>& blocks = prefill.sources[r].src_blocks;
    for (BlockId b = 0; b < kPoolBlocks; ++b) {
      if (std::find(blocks.begin(), blocks.end(), b) != blocks.end()) continue;
      EXPECT_TRUE(BlockHoldsPattern(*prefill.pools[r], b, kSrcGarbageSeed + r, b));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, KvResliceTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// P(tp2) -> D(tp1), for the error paths.
class KvResliceErrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 rng(5);
    prefill_ = MakePrefill(case_, kNumTokens, rng);
    auto plan = MapKvSlabs(case_.model, case_.prefill, case_.decode);
    ASSERT_THAT(plan, IsOk());
    slabs_ = (*plan)[0];
    ASSERT_EQ(slabs_.size(), 2u);
    auto dst = KvPool::Create(case_.model, kPoolBlocks);
    ASSERT_THAT(dst, IsOk());
    dst_ = *std::move(dst);
    FillPool(*dst_, kDstSeed);
  }

  KvPullSpec Spec() const {
    return KvPullSpec{.num_tokens = kNumTokens, .rank_sources = prefill_.sources, .slabs = slabs_};
  }

  ::testing::AssertionResult Untouched() const {
    for (BlockId b = 0; b < kPoolBlocks; ++b) {
      ::testing::AssertionResult result = BlockHoldsPattern(*dst_, b, kDstSeed, b);
      if (!result) return result;
    }
    return ::testing::AssertionSuccess();
  }

  static constexpr int kNumTokens = 2 * 4;
  const Case case_{"P_tp2_to_D_tp1", Model(4, 2), L(2, 1), L(1, 1)};
  const std::vector<BlockId> dst_blocks_{3, 4};
  Prefill prefill_;
  std::vector<KvSlab> slabs_;
  std::unique_ptr<KvPool> dst_;
  ShmTransport shm_;
};

TEST_F(KvResliceErrorTest, UncoveredOrTwiceCoveredHeadsAreInvalidArgument) {
  KvPullSpec spec = Spec();
  spec.slabs.pop_back();
  EXPECT_THAT(shm_.Pull(spec, *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("covered by 0 slabs")));
  spec = Spec();
  spec.slabs.push_back(spec.slabs.back());
  EXPECT_THAT(shm_.Pull(spec, *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("covered by 2 slabs")));
  EXPECT_TRUE(Untouched());
}

TEST_F(KvResliceErrorTest, MalformedSlabsAndSourcesAreInvalidArgument) {
  KvPullSpec spec = Spec();
  spec.slabs[1].src_rank_idx = 2;
  EXPECT_THAT(shm_.Pull(spec, *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("prefill rank 2")));
  spec = Spec();
  spec.slabs[1].src_kv_head_idx = 1;  // the source rank holds one head
  EXPECT_THAT(shm_.Pull(spec, *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outside the source")));
  spec = Spec();
  spec.rank_sources[1].src_blocks.pop_back();
  EXPECT_THAT(shm_.Pull(spec, *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("need 2 blocks")));
  spec = Spec();
  spec.rank_sources[1].src_blocks[0] = kPoolBlocks;
  EXPECT_THAT(shm_.Pull(spec, *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outside the pool")));
  spec = Spec();
  spec.rank_sources[1].shape.head_dim = 8;
  EXPECT_THAT(shm_.Pull(spec, *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("head_dim")));
  spec = Spec();
  spec.rank_sources[1].shape.num_layers = 5;  // fits the slab, but not the segment's own shape
  EXPECT_THAT(shm_.Pull(spec, *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("holds a pool of shape")));
  spec = Spec();
  spec.rank_sources[0].source.shm_name = "";
  EXPECT_THAT(shm_.Pull(spec, *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no shm segment")));
  EXPECT_THAT(shm_.Pull(Spec(), *dst_, std::vector<BlockId>{3, 3}, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("twice")));
  EXPECT_TRUE(Untouched());
}

TEST_F(KvResliceErrorTest, TcpRefusesToReslice) {
  TcpKvTransport tcp;
  KvPullSpec spec = Spec();
  for (KvRankSource& source : spec.rank_sources) source.source.tcp_address = "127.0.0.1:1";
  EXPECT_THAT(tcp.Pull(spec, *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("re-slicing")));
  // Auto picks TCP when a source is on another host, and so refuses too.
  spec.rank_sources[1].source.hostname = "elsewhere";
  AutoKvTransport automatic;
  EXPECT_THAT(automatic.Pull(spec, *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("re-slicing")));
  EXPECT_TRUE(Untouched());
}

TEST_F(KvResliceErrorTest, PassedDeadlineAndDeadSource) {
  EXPECT_THAT(shm_.Pull(Spec(), *dst_, dst_blocks_, absl::Now() - absl::Milliseconds(1)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_TRUE(Untouched());
  prefill_.pools[1].reset();  // the prefill rank holding head 1 goes away
  EXPECT_THAT(shm_.Pull(Spec(), *dst_, dst_blocks_, Soon()),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_TRUE(Untouched());
}

}  // namespace
}  // namespace baton::runtime
