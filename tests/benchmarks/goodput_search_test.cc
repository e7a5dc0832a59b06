// The goodput search, first on attainment curves given as formulas (bracketing both ways, the
// tolerance, the budget), then end to end against a synthetic server: a pure function from a
// planned run to each request's token timestamps (one FIFO prefill server whose service time grows
// with the prompt, then decoding at a fixed pace), whose attainment at any rate is known exactly.
#include "benchmarks/bench/goodput_search.h"

#include <algorithm>
#include <vector>

#include "benchmarks/bench/plan.h"
#include "benchmarks/bench/summary.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace baton::bench {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;

// attainment(rate) = 1 - rate / 100: the goodput at a 90% target is 10 req/s.
absl::StatusOr<double> Linear(double rate) { return std::max(0.0, 1.0 - rate / 100.0); }

TEST(GoodputSearchTest, BracketsUpwardThenBisects) {
  absl::StatusOr<GoodputResult> result =
      SearchGoodput(Linear, {.initial_rate = 1, .rel_tolerance = 0.02});
  ASSERT_THAT(result, IsOk());
  EXPECT_TRUE(result->bracketed);
  EXPECT_TRUE(result->converged);
  EXPECT_LE(result->goodput_per_s, 10.0);
  EXPECT_GE(result->goodput_per_s, 10.0 / 1.02);
  // 1, 2, 4, 8 attain, 16 misses; then bisection inside [8, 16).
  ASSERT_GE(result->runs.size(), 5u);
  EXPECT_EQ(result->runs[4].rate_per_s, 16);
  for (const RatePoint& point : result->runs) {
    EXPECT_DOUBLE_EQ(point.attainment, *Linear(point.rate_per_s));
  }
}

TEST(GoodputSearchTest, BracketsDownward) {
  absl::StatusOr<GoodputResult> result =
      SearchGoodput(Linear, {.initial_rate = 70, .rel_tolerance = 0.05});
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->runs[0].rate_per_s, 70);
  EXPECT_EQ(result->runs[1].rate_per_s, 35);
  EXPECT_EQ(result->runs[2].rate_per_s, 17.5);
  EXPECT_EQ(result->runs[3].rate_per_s, 8.75);  // the first to attain
  EXPECT_LE(result->goodput_per_s, 10.0);
  EXPECT_GE(result->goodput_per_s, 10.0 / 1.05);
}

TEST(GoodputSearchTest, NothingAttainsOrEverythingAttains) {
  absl::StatusOr<GoodputResult> none = SearchGoodput(
      [](double) -> absl::StatusOr<double> { return 0.5; }, {.initial_rate = 1, .min_rate = 0.1});
  ASSERT_THAT(none, IsOk());
  EXPECT_EQ(none->goodput_per_s, 0);
  EXPECT_FALSE(none->bracketed);
  EXPECT_EQ(none->runs.back().rate_per_s, 0.1);

  absl::StatusOr<GoodputResult> all = SearchGoodput(
      [](double) -> absl::StatusOr<double> { return 1.0; }, {.initial_rate = 1, .max_rate = 50});
  ASSERT_THAT(all, IsOk());
  EXPECT_EQ(all->goodput_per_s, 50);
  EXPECT_FALSE(all->bracketed);
}

TEST(GoodputSearchTest, BudgetAndErrors) {
  absl::StatusOr<GoodputResult> short_search =
      SearchGoodput(Linear, {.initial_rate = 1, .rel_tolerance = 1e-6, .max_runs = 7});
  ASSERT_THAT(short_search, IsOk());
  EXPECT_EQ(short_search->runs.size(), 7u);
  EXPECT_FALSE(short_search->converged);
  EXPECT_GT(short_search->goodput_per_s, 8);

  int calls = 0;
  EXPECT_THAT(SearchGoodput(
                  [&](double) -> absl::StatusOr<double> {
                    if (++calls == 2) return absl::UnavailableError("server gone");
                    return 1.0;
                  },
                  {}),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(SearchGoodput(Linear, {.target_attainment = 0}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SearchGoodput(Linear, {.initial_rate = -1}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(GoodputSearchTest, RunLengthRule) {
  const SteadyStateRule rule{.min_duration_s = 60, .min_requests = 100, .warmup_fraction = 0.1};
  EXPECT_EQ(RunLengthForRate(0.5, rule).num_requests, 110);  // 100 measured + 10 warm-up
  EXPECT_EQ(RunLengthForRate(0.5, rule).num_warmup, 10);
  EXPECT_EQ(RunLengthForRate(10, rule).num_requests, 660);  // 600 measured (60 s) + 60
}

// The synthetic server. Prefill: one FIFO server, service time kPrefillBase + kPrefillPerToken *
// input_len; the first token reaches the client when its prefill ends. Decode: one token every
// kTpot after that, unaffected by load. TTFT therefore grows with the rate through queueing alone.
constexpr double kPrefillBase = 0.01;
constexpr double kPrefillPerToken = 0.0002;
constexpr double kTpot = 0.02;

std::vector<RequestRecord> SyntheticServer(const std::vector<PlannedRequest>& plan) {
  std::vector<RequestRecord> records;
  double server_free_s = 0;
  for (const PlannedRequest& request : plan) {
    RequestRecord record;
    record.request_idx = request.request_idx;
    record.warmup = request.warmup;
    record.input_len = request.input_len;
    record.output_len = request.output_len;
    record.arrival_s = request.arrival_s;
    record.sent_s = request.arrival_s;
    const double start_s = std::max(server_free_s, request.arrival_s);
    server_free_s = start_s + kPrefillBase + kPrefillPerToken * request.input_len;
    for (int i = 0; i < request.output_len; ++i)
      record.token_s.push_back(server_free_s + i * kTpot);
    record.num_output_tokens = request.output_len;
    record.end_s = record.token_s.back();
    record.ok = true;
    records.push_back(std::move(record));
  }
  return records;
}

TEST(GoodputSearchTest, FindsTheSyntheticServersGoodput) {
  const WorkloadDefinition workload = MakeRandomWorkload({100, 500}, {2, 20});
  const PromptCorpus corpus(std::vector<int32_t>(1000, 5), {1});
  const Slo slo{.ttft_s = 0.25, .tpot_s = 0.05};
  // A fixed request count at every rate searched, and one seed (common random numbers): the plans
  // differ only in their time scale, the FIFO waits can only grow with the rate, so attainment
  // falls monotonically and the search's answer is exact to its tolerance.
  const SteadyStateRule rule{.min_duration_s = 1, .min_requests = 2000, .warmup_fraction = 0.1};
  const auto attainment_at = [&](double rate) -> absl::StatusOr<double> {
    const RunLength length = RunLengthForRate(rate, rule);
    absl::StatusOr<std::vector<PlannedRequest>> plan = PlanWorkload(
        workload, {.rate_per_s = rate},
        {.num_requests = length.num_requests, .num_warmup = length.num_warmup, .seed = 3}, &corpus);
    if (!plan.ok()) return plan.status();
    return Attainment(SyntheticServer(*plan), slo);
  };
  const double tolerance = 0.03;
  absl::StatusOr<GoodputResult> result = SearchGoodput(
      attainment_at, {.initial_rate = 1, .target_attainment = 0.9, .rel_tolerance = tolerance});
  ASSERT_THAT(result, IsOk());
  ASSERT_TRUE(result->converged);
  // Mean service time 0.07 s: the server saturates at ~14 req/s, and queueing pushes 10% of TTFTs
  // past 0.25 s well before that.
  EXPECT_GT(result->goodput_per_s, 3);
  EXPECT_LT(result->goodput_per_s, 14.3);
  // The answer attains the target and a rate one tolerance step above it does not.
  EXPECT_GE(*attainment_at(result->goodput_per_s), 0.9);
  EXPECT_LT(*attainment_at(result->goodput_per_s * (1 + tolerance)), 0.9);
}

}  // namespace
}  // namespace baton::bench
