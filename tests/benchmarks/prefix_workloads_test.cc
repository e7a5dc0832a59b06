// The workloads that repeat prefixes (prefix_workloads.h): prefix repetition draws each request's
// prefix from a fixed few and adds a suffix of its own; multi-turn sessions plan each turn's new
// message and answer, the history counted in input_len, cut where max_model_len would be passed.
#include "benchmarks/bench/prefix_workloads.h"

#include <numeric>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace baton::bench {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;

PromptCorpus Corpus() {
  std::vector<int32_t> stream(5000);
  std::iota(stream.begin(), stream.end(), 100);
  return PromptCorpus(std::move(stream), {1});  // BOS 1
}

const ArrivalSpec kArrivals{.kind = ArrivalKind::kPoisson, .rate_per_s = 10};

TEST(PrefixRepetitionTest, RequestsShareAFewPrefixesAndKeepSuffixesOfTheirOwn) {
  const PromptCorpus corpus = Corpus();
  auto plan = PlanPrefixRepetition({.prefix_len = 40, .suffix_len = 8, .num_prefixes = 3, .output_len = 5},
                                   kArrivals, {.num_requests = 60, .num_warmup = 2, .seed = 7}, corpus);
  ASSERT_THAT(plan, IsOk());
  ASSERT_EQ(plan->size(), 60u);
  std::set<std::vector<int32_t>> prefixes;
  std::set<std::vector<int32_t>> suffixes;
  for (const PlannedRequest& request : *plan) {
    ASSERT_EQ(request.prompt_ids.size(), 48u);
    EXPECT_EQ(request.input_len, 48);
    EXPECT_EQ(request.output_len, 5);
    EXPECT_EQ(request.prompt_ids[0], 1) << "a prefix starts a prompt: BOS";
    EXPECT_NE(request.prompt_ids[40], 1) << "a suffix continues it: no BOS";
    prefixes.emplace(request.prompt_ids.begin(), request.prompt_ids.begin() + 40);
    suffixes.emplace(request.prompt_ids.begin() + 40, request.prompt_ids.end());
  }
  EXPECT_EQ(prefixes.size(), 3u);
  EXPECT_GT(suffixes.size(), 50u);
  EXPECT_TRUE((*plan)[1].warmup);
  EXPECT_FALSE((*plan)[2].warmup);
  auto again = PlanPrefixRepetition({.prefix_len = 40, .suffix_len = 8, .num_prefixes = 3, .output_len = 5},
                                    kArrivals, {.num_requests = 60, .num_warmup = 2, .seed = 7}, corpus);
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ((*again)[17].prompt_ids, (*plan)[17].prompt_ids) << "reproducible from the seed";
}

TEST(PrefixRepetitionTest, BadShapesAreRefusedByName) {
  const PromptCorpus corpus = Corpus();
  EXPECT_THAT(PlanPrefixRepetition({.num_prefixes = 0}, kArrivals, {.num_requests = 4}, corpus),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("num_prefixes 0")));
  EXPECT_THAT(PlanPrefixRepetition({.suffix_len = 0}, kArrivals, {.num_requests = 4}, corpus), IsOk());
}

TEST(MultiTurnTest, TurnsCarryTheirHistoryAndStopBeforeTheContextEnds) {
  const PromptCorpus corpus = Corpus();
  WorkloadDefinition workload = MakeRandomWorkload({.min_len = 10, .max_len = 10}, {.min_len = 6, .max_len = 6});
  auto plan = PlanMultiTurn(workload, {.num_turns = 4, .think_s = 0.5, .max_model_len = 60}, kArrivals,
                            {.num_requests = 3, .num_warmup = 1, .seed = 3}, &corpus);
  ASSERT_THAT(plan, IsOk());
  // Turn t's prompt: 16 t tokens of history + 10 new; t = 3 would need 58 + 6 > 60.
  ASSERT_EQ(plan->size(), 9u);
  for (int i = 0; i < 9; ++i) {
    const PlannedRequest& request = (*plan)[i];
    EXPECT_EQ(request.request_idx, i);
    EXPECT_EQ(request.session, i / 3);
    EXPECT_EQ(request.turn, i % 3);
    EXPECT_EQ(request.input_len, 16 * request.turn + 10);
    EXPECT_EQ(request.prompt_ids.size(), 10u) << "the new message alone; the runner adds the history";
    EXPECT_EQ(request.prompt_ids[0] == 1, request.turn == 0) << "BOS starts a conversation only";
    EXPECT_EQ(request.warmup, request.session == 0);
    EXPECT_DOUBLE_EQ(request.think_s, 0.5);
    if (request.turn > 0) {
      EXPECT_EQ(request.arrival_s, 0);
    }
  }
  EXPECT_LT((*plan)[0].arrival_s, (*plan)[3].arrival_s);
}

}  // namespace
}  // namespace baton::bench
