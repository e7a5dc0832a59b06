#include "runtime/transfer/kv_slab_mapping.h"

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/check.h"
#include "runtime/model/model_shard.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {

void PrintTo(const KvSlab& s, std::ostream* os) {
  *os << "{src " << s.src_rank_idx << ", layers [" << s.layer_begin << ", " << s.layer_end
      << "), heads [" << s.kv_head_begin << ", " << s.kv_head_end << "), src local ("
      << s.src_layer_idx << ", " << s.src_kv_head_idx << "), dst local (" << s.dst_layer_idx
      << ", " << s.dst_kv_head_idx << ")}";
}

namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;

KvPoolShape Model(int num_layers, int num_kv_heads) {
  return KvPoolShape{.num_layers = num_layers, .num_kv_heads = num_kv_heads, .head_dim = 8,
                     .block_size = 16};
}

// src, layers [lb, le), heads [hb, he), source-local (layer, head), destination-local (layer, head)
KvSlab S(int src, int lb, int le, int hb, int he, int sl, int sh, int dl, int dh) {
  return KvSlab{.src_rank_idx = src, .layer_begin = lb, .layer_end = le, .kv_head_begin = hb,
                .kv_head_end = he, .src_layer_idx = sl, .src_kv_head_idx = sh, .dst_layer_idx = dl,
                .dst_kv_head_idx = dh};
}

ParallelLayout L(int tp_size, int pp_size, std::vector<int> stage_num_layers = {}) {
  return ParallelLayout{.tp_size = tp_size, .pp_size = pp_size,
                  .stage_num_layers = std::move(stage_num_layers)};
}

struct Case {
  const char* what;
  KvPoolShape model;
  ParallelLayout prefill;
  ParallelLayout decode;
  std::vector<std::vector<KvSlab>> slabs;  // expected, per decode rank
};

// A function, not a local initializer list: GCC 12 reports a false -Wuse-after-free when that
// list's ParallelLayout vectors are destroyed inline in the test body.
std::vector<Case> TableCases() {
  return {
      {"P(tp2) -> D(tp1)", Model(4, 2), L(2, 1), L(1, 1),
       {{S(0, 0, 4, 0, 1, 0, 0, 0, 0), S(1, 0, 4, 1, 2, 0, 0, 0, 1)}}},
      {"P(tp1) -> D(tp2)", Model(4, 2), L(1, 1), L(2, 1),
       {{S(0, 0, 4, 0, 1, 0, 0, 0, 0)}, {S(0, 0, 4, 1, 2, 0, 1, 0, 0)}}},
      {"P(pp2) -> D(tp2)", Model(4, 2), L(1, 2), L(2, 1),
       {{S(0, 0, 2, 0, 1, 0, 0, 0, 0), S(1, 2, 4, 0, 1, 0, 0, 2, 0)},
        {S(0, 0, 2, 1, 2, 0, 1, 0, 0), S(1, 2, 4, 1, 2, 0, 1, 2, 0)}}},
      {"P(tp2 x pp2) -> D(pp2)", Model(4, 2), L(2, 2), L(1, 2),
       {{S(0, 0, 2, 0, 1, 0, 0, 0, 0), S(1, 0, 2, 1, 2, 0, 0, 0, 1)},
        {S(2, 2, 4, 0, 1, 0, 0, 0, 0), S(3, 2, 4, 1, 2, 0, 0, 0, 1)}}},
      {"P(tp2 x pp2) -> D(tp2 x pp2): rank to rank", Model(4, 2), L(2, 2), L(2, 2),
       {{S(0, 0, 2, 0, 1, 0, 0, 0, 0)},
        {S(1, 0, 2, 1, 2, 0, 0, 0, 0)},
        {S(2, 2, 4, 0, 1, 0, 0, 0, 0)},
        {S(3, 2, 4, 1, 2, 0, 0, 0, 0)}}},
      // Prefill ranks 0, 1 hold head 0 and ranks 2, 3 head 1; decode rank 0 reads replica 0.
      {"P(tp4) -> D(tp1), 2 kv heads: replicated on prefill", Model(4, 2), L(4, 1), L(1, 1),
       {{S(0, 0, 4, 0, 1, 0, 0, 0, 0), S(2, 0, 4, 1, 2, 0, 0, 0, 1)}}},
      // Decode rank 1 reads replica 1 (prefill rank 3): the reads spread over the replicas.
      {"P(tp4) -> D(tp2), 2 kv heads: replicas spread", Model(4, 2), L(4, 1), L(2, 1),
       {{S(0, 0, 4, 0, 1, 0, 0, 0, 0)}, {S(3, 0, 4, 1, 2, 0, 0, 0, 0)}}},
      {"P(tp1) -> D(tp4), 2 kv heads: replicated on decode", Model(4, 2), L(1, 1), L(4, 1),
       {{S(0, 0, 4, 0, 1, 0, 0, 0, 0)},
        {S(0, 0, 4, 0, 1, 0, 0, 0, 0)},
        {S(0, 0, 4, 1, 2, 0, 1, 0, 0)},
        {S(0, 0, 4, 1, 2, 0, 1, 0, 0)}}},
      // 5 layers: prefill stages [0, 3), [3, 5); decode stages [0, 2), [2, 4), [4, 5).
      {"uneven: P(pp2) -> D(pp3), 5 layers", Model(5, 2), L(1, 2), L(1, 3),
       {{S(0, 0, 2, 0, 2, 0, 0, 0, 0)},
        {S(0, 2, 3, 0, 2, 2, 0, 0, 0), S(1, 3, 4, 0, 2, 0, 0, 1, 0)},
        {S(1, 4, 5, 0, 2, 1, 0, 0, 0)}}},
      // Explicit prefill split [0, 1), [1, 5); decode balanced [0, 3), [3, 5).
      {"explicit split: P(pp2 {1, 4}) -> D(pp2)", Model(5, 2), L(1, 2, {1, 4}),
       L(1, 2),
       {{S(0, 0, 1, 0, 2, 0, 0, 0, 0), S(1, 1, 3, 0, 2, 0, 0, 1, 0)},
        {S(1, 3, 5, 0, 2, 2, 0, 0, 0)}}},
  };
}

TEST(MapKvSlabsTest, Table) {
  for (const Case& c : TableCases()) {
    auto slabs = MapKvSlabs(c.model, c.prefill, c.decode);
    ASSERT_THAT(slabs, IsOk()) << c.what;
    EXPECT_EQ(*slabs, c.slabs) << c.what;
  }
}

TEST(MapKvSlabsTest, BytesOfOneCase) {
  // P(tp2) -> D(tp1), 4 layers, 2 kv heads, head_dim 8, f32: 4 * 2 * 8 * 2 * 4 bytes per token.
  const KvPoolShape model = Model(4, 2);
  auto slabs = MapKvSlabs(model, {.tp_size = 2}, {});
  ASSERT_THAT(slabs, IsOk());
  auto dst = MakeKvRankShard(model, {}, 0);
  ASSERT_THAT(dst, IsOk());
  const KvBytes expected{.per_token_bytes = 512, .per_block_bytes = 512 * 16};
  EXPECT_EQ(OwnedKvBytes(*dst), expected);
  EXPECT_EQ(SlabKvBytes((*slabs)[0], model), expected);
  EXPECT_EQ(dst->pool_shape.BlockBytes(), size_t{512 * 16});

  // bf16: half the bytes, taken from the shape's dtype (and a rank's pool inherits the model's).
  KvPoolShape bf16_model = model;
  bf16_model.dtype = DType::kBF16;
  auto bf16_dst = MakeKvRankShard(bf16_model, {}, 0);
  ASSERT_THAT(bf16_dst, IsOk());
  EXPECT_EQ(bf16_dst->pool_shape.dtype, DType::kBF16);
  const KvBytes bf16_expected{.per_token_bytes = 256, .per_block_bytes = 256 * 16};
  EXPECT_EQ(OwnedKvBytes(*bf16_dst), bf16_expected);
  EXPECT_EQ(SlabKvBytes((*slabs)[0], bf16_model), bf16_expected);
  EXPECT_EQ(bf16_dst->pool_shape.BlockBytes(), size_t{256 * 16});
}

// For every layout pair of a sweep, checked against MakeModelShard (what each rank holds, derived
// independently of the mapping): every (layer, head) a decode rank holds is covered exactly once,
// no slab reads outside its source rank, local offsets agree with the ranks' ranges, slabs are
// sorted, and bytes moved equal bytes owned.
TEST(MapKvSlabsTest, PropertiesOverASweepOfLayouts) {
  std::vector<ParallelLayout> layouts;
  for (int tp_size : {1, 2, 4}) {
    for (int pp_size : {1, 2, 3}) layouts.push_back({.tp_size = tp_size, .pp_size = pp_size});
  }
  int num_pairs = 0;
  for (int num_layers : {4, 5, 6}) {
    for (int num_kv_heads : {1, 2, 4}) {
      const KvPoolShape model = Model(num_layers, num_kv_heads);
      ModelConfig config;
      config.num_layers = num_layers;
      config.num_kv_heads = num_kv_heads;
      config.num_heads = num_kv_heads * 4;
      config.intermediate_size = 64;
      config.vocab_size = 64;
      auto shard_of = [&](const ParallelLayout& layout, int rank_idx) {
        auto spec = ShardSpecOfRank(layout, rank_idx);
        BATON_CHECK(spec.ok());
        auto shard = MakeModelShard(config, *spec);
        BATON_CHECK(shard.ok());
        return *shard;
      };
      for (const ParallelLayout& prefill : layouts) {
        for (const ParallelLayout& decode : layouts) {
          const std::string what =
              absl::StrCat("layers ", num_layers, ", kv heads ", num_kv_heads, ": P(",
                           LayoutString(prefill), ") -> D(", LayoutString(decode), ")");
          auto slabs = MapKvSlabs(model, prefill, decode);
          ASSERT_THAT(slabs, IsOk()) << what;
          ASSERT_EQ(static_cast<int>(slabs->size()), decode.num_ranks()) << what;
          ++num_pairs;
          for (int dst_idx = 0; dst_idx < decode.num_ranks(); ++dst_idx) {
            const ModelShard dst = shard_of(decode, dst_idx);
            const std::vector<KvSlab>& rank_slabs = (*slabs)[dst_idx];
            std::vector<int> times_covered(num_layers * num_kv_heads, 0);
            for (size_t i = 0; i < rank_slabs.size(); ++i) {
              const KvSlab& slab = rank_slabs[i];
              ASSERT_GE(slab.src_rank_idx, 0) << what;
              ASSERT_LT(slab.src_rank_idx, prefill.num_ranks()) << what;
              const ModelShard src = shard_of(prefill, slab.src_rank_idx);
              EXPECT_GE(slab.num_layers(), 1) << what;
              EXPECT_GE(slab.num_kv_heads(), 1) << what;
              // Inside the source rank and the destination rank.
              EXPECT_GE(slab.layer_begin, src.layer_begin) << what;
              EXPECT_LE(slab.layer_end, src.layer_end) << what;
              EXPECT_GE(slab.kv_head_begin, src.kv_head_begin) << what;
              EXPECT_LE(slab.kv_head_end, src.kv_head_end) << what;
              EXPECT_GE(slab.layer_begin, dst.layer_begin) << what;
              EXPECT_LE(slab.layer_end, dst.layer_end) << what;
              EXPECT_GE(slab.kv_head_begin, dst.kv_head_begin) << what;
              EXPECT_LE(slab.kv_head_end, dst.kv_head_end) << what;
              // Local offsets.
              EXPECT_EQ(slab.src_layer_idx, slab.layer_begin - src.layer_begin) << what;
              EXPECT_EQ(slab.src_kv_head_idx, slab.kv_head_begin - src.kv_head_begin) << what;
              EXPECT_EQ(slab.dst_layer_idx, slab.layer_begin - dst.layer_begin) << what;
              EXPECT_EQ(slab.dst_kv_head_idx, slab.kv_head_begin - dst.kv_head_begin) << what;
              if (i > 0) {
                const KvSlab& prev = rank_slabs[i - 1];
                EXPECT_TRUE(prev.layer_begin < slab.layer_begin ||
                            (prev.layer_begin == slab.layer_begin &&
                             prev.kv_head_begin < slab.kv_head_begin))
                    << what << ": slabs out of order";
              }
              for (int layer = slab.layer_begin; layer < slab.layer_end; ++layer) {
                for (int head = slab.kv_head_begin; head < slab.kv_head_end; ++head) {
                  ++times_covered[layer * num_kv_heads + head];
                }
              }
            }
            for (int layer = 0; layer < num_layers; ++layer) {
              for (int head = 0; head < num_kv_heads; ++head) {
                const bool owned = layer >= dst.layer_begin && layer < dst.layer_end &&
                                   head >= dst.kv_head_begin && head < dst.kv_head_end;
                EXPECT_EQ(times_covered[layer * num_kv_heads + head], owned ? 1 : 0)
                    << what << ", decode rank " << dst_idx << ", layer " << layer << ", head "
                    << head;
              }
            }
            auto rank = MakeKvRankShard(model, decode, dst_idx);
            ASSERT_THAT(rank, IsOk()) << what;
            const KvBytes owned = OwnedKvBytes(*rank);
            EXPECT_EQ(owned.per_token_bytes, int64_t{dst.num_layers()} * dst.num_kv_heads *
                                                 model.head_dim * 2 * int64_t{sizeof(float)})
                << what;
            EXPECT_EQ(owned.per_block_bytes,
                      static_cast<int64_t>(rank->pool_shape.BlockBytes()))
                << what;
            EXPECT_EQ(SlabKvBytes(rank_slabs, model), owned) << what << ", rank " << dst_idx;
          }
        }
      }
    }
  }
  EXPECT_EQ(num_pairs, 3 * 3 * 9 * 9);
}

TEST(MapKvSlabsTest, RejectsLayoutsThatDoNotFit) {
  struct ErrorCase {
    const char* what;
    KvPoolShape model;
    ParallelLayout prefill;
    ParallelLayout decode;
    const char* message;
  };
  const std::vector<ErrorCase> cases = {
      {"prefill tp does not fit the kv heads", Model(4, 2), {.tp_size = 3}, {},
       "prefill layout: shard: tp_size 3 neither divides nor is a multiple of num_kv_heads 2"},
      {"decode tp does not fit the kv heads", Model(4, 4), {}, {.tp_size = 6},
       "decode layout: shard: tp_size 6 neither divides nor is a multiple of num_kv_heads 4"},
      {"more stages than layers", Model(4, 2), {}, {.pp_size = 5},
       "decode layout: shard: 5 pipeline stages for 4 layers"},
      {"split does not sum to the layers", Model(4, 2),
       {.pp_size = 2, .stage_num_layers = {1, 2}}, {},
       "prefill layout: shard: layer split [1, 2] sums to 3, the model has 4 layers"},
      {"split with an empty stage", Model(4, 2), {},
       {.pp_size = 2, .stage_num_layers = {4, 0}}, "stage 1 has 0 layers"},
      {"split of the wrong length", Model(4, 2), {},
       {.pp_size = 3, .stage_num_layers = {2, 2}}, "has 2 stages, pp_size is 3"},
      {"tp_size 0", Model(4, 2), {.tp_size = 0}, {}, "prefill layout: shard: rank 0 of tp 0"},
      {"empty model", Model(0, 2), {}, {}, "has a size below 1"},
  };
  for (const ErrorCase& c : cases) {
    EXPECT_THAT(MapKvSlabs(c.model, c.prefill, c.decode),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.what;
  }
  EXPECT_THAT(MakeKvRankShard(Model(4, 2), {.tp_size = 2}, 2),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank 2 of tp 2 x pp 1")));
}

}  // namespace
}  // namespace baton::runtime
