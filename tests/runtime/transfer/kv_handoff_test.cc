// PlanKvPulls: a prefill instance's hand-off turned into each decode rank's pull, for equal and
// different layouts, and the hand-offs it refuses.
#include "runtime/transfer/kv_handoff.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/transfer/kv_slab_mapping.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr KvPoolShape kModel{.num_layers = 4, .num_kv_heads = 2, .head_dim = 8, .block_size = 4};

ParallelLayout L(int tp_size, int pp_size, std::vector<int> stage_num_layers = {}) {
  return ParallelLayout{.tp_size = tp_size, .pp_size = pp_size,
                        .stage_num_layers = std::move(stage_num_layers)};
}

// A hand-off of 10 tokens (3 blocks of 4) from `layout`, rank r reachable as "/kv-r" / "host:r".
KvHandoff Handoff(const ParallelLayout& layout, const KvPoolShape& model = kModel) {
  KvHandoff handoff{.model_shape = model, .layout = layout, .blocks = {5, 2, 9}, .num_tokens = 10};
  for (int r = 0; r < layout.num_ranks(); ++r) {
    handoff.rank_sources.push_back(KvSource{.hostname = "h", .boot_id = "b",
                                            .shm_name = absl::StrCat("/kv-", r),
                                            .tcp_address = absl::StrCat("host:", r)});
  }
  return handoff;
}

KvPoolShape PoolShape(const ParallelLayout& layout, int rank_idx) {
  absl::StatusOr<KvRankShard> shard = MakeKvRankShard(kModel, layout, rank_idx);
  EXPECT_THAT(shard, IsOk());
  return shard->pool_shape;
}

TEST(PlanKvPullsTest, EqualLayoutsPullWholeBlocksFromTheSameRank) {
  const ParallelLayout layout = L(2, 2);
  const KvHandoff handoff = Handoff(layout);
  absl::StatusOr<std::vector<KvPullSpec>> specs = PlanKvPulls(handoff, kModel, layout);
  ASSERT_THAT(specs, IsOk());
  ASSERT_EQ(specs->size(), 4u);
  for (int d = 0; d < 4; ++d) {
    const KvPullSpec& spec = (*specs)[d];
    EXPECT_FALSE(spec.resliced());
    EXPECT_EQ(spec.source.shm_name, absl::StrCat("/kv-", d));
    EXPECT_EQ(spec.source.tcp_address, absl::StrCat("host:", d));
    EXPECT_EQ(spec.shape, PoolShape(layout, d));
    EXPECT_THAT(spec.src_blocks, ElementsAre(5, 2, 9));
    EXPECT_EQ(spec.num_tokens, 10);
  }
}

TEST(PlanKvPullsTest, OneRankToOneRankIsOneWholeModelPull) {
  absl::StatusOr<std::vector<KvPullSpec>> specs = PlanKvPulls(Handoff(L(1, 1)), kModel, L(1, 1));
  ASSERT_THAT(specs, IsOk());
  ASSERT_EQ(specs->size(), 1u);
  EXPECT_FALSE((*specs)[0].resliced());
  EXPECT_EQ((*specs)[0].shape, kModel);
}

TEST(PlanKvPullsTest, ABalancedAndAnExplicitSplitOfTheSameLayersAreTheSamePartition) {
  absl::StatusOr<std::vector<KvPullSpec>> specs =
      PlanKvPulls(Handoff(L(1, 2)), kModel, L(1, 2, {2, 2}));
  ASSERT_THAT(specs, IsOk());
  ASSERT_EQ(specs->size(), 2u);
  for (const KvPullSpec& spec : *specs) EXPECT_FALSE(spec.resliced());
  // A different explicit split is not.
  specs = PlanKvPulls(Handoff(L(1, 2)), kModel, L(1, 2, {1, 3}));
  ASSERT_THAT(specs, IsOk());
  for (const KvPullSpec& spec : *specs) EXPECT_TRUE(spec.resliced());
}

// For different layouts: each decode rank's slabs are MapKvSlabs', its rank sources name exactly
// the prefill ranks those slabs read (with their pool shapes and the shared block ids), and the
// slabs move exactly the bytes the decode rank owns.
TEST(PlanKvPullsTest, DifferentLayoutsGiveEachDecodeRankItsSlabsAndTheirSources) {
  const std::vector<std::pair<ParallelLayout, ParallelLayout>> cases = {
      {L(2, 1), L(1, 1)}, {L(1, 1), L(2, 1)}, {L(1, 2), L(2, 1)}, {L(2, 2), L(1, 2)},
      {L(1, 1), L(4, 1)}, {L(4, 1), L(2, 2)}, {L(2, 2), L(1, 4)}, {L(1, 2, {1, 3}), L(2, 2)}};
  for (const auto& [prefill, decode] : cases) {
    SCOPED_TRACE(absl::StrCat("P(", LayoutString(prefill), ") -> D(", LayoutString(decode), ")"));
    absl::StatusOr<std::vector<KvPullSpec>> specs = PlanKvPulls(Handoff(prefill), kModel, decode);
    ASSERT_THAT(specs, IsOk());
    absl::StatusOr<std::vector<std::vector<KvSlab>>> slabs = MapKvSlabs(kModel, prefill, decode);
    ASSERT_THAT(slabs, IsOk());
    ASSERT_EQ(specs->size(), static_cast<size_t>(decode.num_ranks()));
    for (int d = 0; d < decode.num_ranks(); ++d) {
      const KvPullSpec& spec = (*specs)[d];
      ASSERT_TRUE(spec.resliced());
      EXPECT_EQ(spec.slabs, (*slabs)[d]);
      EXPECT_EQ(spec.num_tokens, 10);
      ASSERT_EQ(spec.rank_sources.size(), static_cast<size_t>(prefill.num_ranks()));
      std::vector<bool> named(prefill.num_ranks(), false);
      for (const KvSlab& slab : spec.slabs) named[slab.src_rank_idx] = true;
      for (int p = 0; p < prefill.num_ranks(); ++p) {
        const KvRankSource& source = spec.rank_sources[p];
        if (!named[p]) {
          EXPECT_THAT(source.src_blocks, IsEmpty());
          continue;
        }
        EXPECT_EQ(source.source.shm_name, absl::StrCat("/kv-", p));
        EXPECT_EQ(source.shape, PoolShape(prefill, p));
        EXPECT_THAT(source.src_blocks, ElementsAre(5, 2, 9));
      }
      absl::StatusOr<KvRankShard> dst = MakeKvRankShard(kModel, decode, d);
      ASSERT_THAT(dst, IsOk());
      EXPECT_EQ(SlabKvBytes(spec.slabs, kModel), OwnedKvBytes(*dst));
    }
  }
}

TEST(PlanKvPullsTest, AHandoffOfNoTokensPlansEmptyPulls) {
  KvHandoff handoff = Handoff(L(2, 1));
  handoff.blocks.clear();
  handoff.num_tokens = 0;
  absl::StatusOr<std::vector<KvPullSpec>> specs = PlanKvPulls(handoff, kModel, L(1, 1));
  ASSERT_THAT(specs, IsOk());
  ASSERT_EQ(specs->size(), 1u);
  EXPECT_EQ((*specs)[0].num_tokens, 0);
}

TEST(PlanKvPullsTest, RefusesAHandoffWithTheWrongNumberOfRankSources) {
  KvHandoff handoff = Handoff(L(2, 2));
  handoff.rank_sources.pop_back();
  EXPECT_THAT(PlanKvPulls(handoff, kModel, L(1, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("prefill layout tp 2 x pp 2 has 4 ranks but the hand-off names 3 "
                                 "rank sources")));
}

TEST(PlanKvPullsTest, RefusesLayoutsThatDoNotFitTheModel) {
  // tp 3 neither divides nor is a multiple of 2 KV heads.
  EXPECT_THAT(PlanKvPulls(Handoff(L(3, 1)), kModel, L(1, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("KV hand-off: prefill")));
  EXPECT_THAT(PlanKvPulls(Handoff(L(1, 1)), kModel, L(3, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("KV hand-off: decode")));
  // More stages than layers; a split that does not sum to the layers.
  EXPECT_THAT(PlanKvPulls(Handoff(L(1, 5)), kModel, L(1, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("KV hand-off: prefill")));
  EXPECT_THAT(PlanKvPulls(Handoff(L(1, 1)), kModel, L(1, 2, {1, 2})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("KV hand-off: decode")));
  KvHandoff zero = Handoff(L(1, 1));
  zero.layout.tp_size = 0;
  zero.rank_sources.clear();
  EXPECT_THAT(PlanKvPulls(zero, kModel, L(1, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("size below 1")));
}

TEST(PlanKvPullsTest, RefusesModelsWhoseKvShapesDiffer) {
  for (const auto& [what, decode_model] : std::vector<std::pair<std::string, KvPoolShape>>{
           {"head_dim", {.num_layers = 4, .num_kv_heads = 2, .head_dim = 16, .block_size = 4}},
           {"block_size", {.num_layers = 4, .num_kv_heads = 2, .head_dim = 8, .block_size = 16}},
           {"num_layers", {.num_layers = 6, .num_kv_heads = 2, .head_dim = 8, .block_size = 4}},
           {"num_kv_heads", {.num_layers = 4, .num_kv_heads = 4, .head_dim = 8, .block_size = 4}},
           {"dtype",
            {.num_layers = 4, .num_kv_heads = 2, .head_dim = 8, .block_size = 4,
             .dtype = DType::kBF16}}}) {
    SCOPED_TRACE(what);
    EXPECT_THAT(PlanKvPulls(Handoff(L(2, 1)), decode_model, L(2, 1)),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("the prefill instance's model KV (layers 4, kv heads 2, "
                                   "head_dim 8, block_size 4, dtype f32) differs from the decode "
                                   "instance's")));
  }
  // The message names the decode side's element type too.
  KvPoolShape bf16_model = kModel;
  bf16_model.dtype = DType::kBF16;
  EXPECT_THAT(PlanKvPulls(Handoff(L(2, 1)), bf16_model, L(2, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("block_size 4, dtype bf16)")));
}

TEST(PlanKvPullsTest, ABf16HandoffPlansBf16Pulls) {
  KvPoolShape bf16_model = kModel;
  bf16_model.dtype = DType::kBF16;
  // Same layout: whole-block pulls of bf16 pools.
  auto same = PlanKvPulls(Handoff(L(2, 1), bf16_model), bf16_model, L(2, 1));
  ASSERT_THAT(same, IsOk());
  for (const KvPullSpec& spec : *same) EXPECT_EQ(spec.shape.dtype, DType::kBF16);
  // Re-sliced: every source rank's pool is bf16, and the bytes are counted as bf16.
  auto resliced = PlanKvPulls(Handoff(L(2, 1), bf16_model), bf16_model, L(1, 1));
  ASSERT_THAT(resliced, IsOk());
  ASSERT_EQ(resliced->size(), 1u);
  for (const KvRankSource& source : (*resliced)[0].rank_sources) {
    EXPECT_EQ(source.shape.dtype, DType::kBF16);
  }
  auto dst = MakeKvRankShard(bf16_model, L(1, 1), 0);
  ASSERT_THAT(dst, IsOk());
  EXPECT_EQ(SlabKvBytes((*resliced)[0].slabs, bf16_model), OwnedKvBytes(*dst));
  EXPECT_EQ(OwnedKvBytes(*dst).per_token_bytes, 4 * 2 * 8 * 2 * 2);
}

TEST(PlanKvPullsTest, RefusesAHandoffOfAnUnknownElementType) {
  KvHandoff handoff = Handoff(L(1, 1));
  handoff.unknown_kv_dtype = "fp8";
  EXPECT_THAT(ValidateKvHandoff(handoff),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"fp8\" is unknown")));
  EXPECT_THAT(PlanKvPulls(handoff, kModel, L(1, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"fp8\"")));
}

TEST(PlanKvPullsTest, RefusesBlockListsThatDoNotMatchTheTokens) {
  KvHandoff handoff = Handoff(L(1, 1));
  handoff.blocks.pop_back();
  EXPECT_THAT(PlanKvPulls(handoff, kModel, L(1, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("10 tokens need 3 blocks of 4 but the hand-off names 2")));
  handoff = Handoff(L(1, 1));
  handoff.num_tokens = -1;
  EXPECT_THAT(PlanKvPulls(handoff, kModel, L(1, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_tokens -1 < 0")));
  handoff = Handoff(L(1, 1));
  handoff.blocks[1] = -3;
  EXPECT_THAT(PlanKvPulls(handoff, kModel, L(1, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("block -3 (index 1) < 0")));
}

}  // namespace
}  // namespace baton::runtime
