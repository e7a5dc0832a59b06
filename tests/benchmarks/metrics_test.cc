// Per-request metrics from known timestamps, summaries, SLO attainment and the SLO-scale sweep.
#include "benchmarks/bench/metrics.h"

#include <cmath>
#include <vector>

#include "benchmarks/bench/summary.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::bench {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pointwise;

// A completed request: arrived at `arrival`, its tokens at `token_s`.
RequestRecord Completed(double arrival_s, std::vector<double> token_s, bool warmup = false) {
  RequestRecord record;
  record.arrival_s = arrival_s;
  record.sent_s = arrival_s;
  record.token_s = std::move(token_s);
  record.end_s = record.token_s.back();
  record.num_output_tokens = static_cast<int>(record.token_s.size());
  record.ok = true;
  record.warmup = warmup;
  return record;
}

RequestRecord Failed(double arrival_s) {
  RequestRecord record;
  record.arrival_s = arrival_s;
  record.error = "UNAVAILABLE: worker gone";
  return record;
}

TEST(MetricsTest, TtftTpotItlAndE2eFromKnownTimestamps) {
  // Arrived at 1.0; tokens at 1.5, 1.6, 1.8, 2.1.
  const std::optional<RequestMetrics> m = ComputeMetrics(Completed(1.0, {1.5, 1.6, 1.8, 2.1}));
  ASSERT_TRUE(m.has_value());
  EXPECT_DOUBLE_EQ(m->ttft_s, 0.5);
  EXPECT_DOUBLE_EQ(m->e2e_s, 1.1);
  ASSERT_TRUE(m->tpot_s.has_value());
  EXPECT_DOUBLE_EQ(*m->tpot_s, 0.6 / 3);  // mean of the gaps after the first token
  EXPECT_THAT(m->itl_s, Pointwise(DoubleNear(1e-12), std::vector<double>{0.1, 0.2, 0.3}));
  EXPECT_FALSE(m->phases.has_value());
}

TEST(MetricsTest, TtftCountsFromTheScheduledArrivalNotTheSend) {
  RequestRecord late = Completed(1.0, {2.0, 2.5});
  late.sent_s = 1.8;  // held back by the concurrency cap
  EXPECT_DOUBLE_EQ(ComputeMetrics(late)->ttft_s, 1.0);
}

TEST(MetricsTest, ServerTokenCountSetsTpotWhenChunksCarrySeveralTokens) {
  // Two SSE chunks carrying 5 tokens in all: TPOT spreads the time over 4 gaps.
  RequestRecord record = Completed(0.0, {0.2, 1.0});
  record.num_output_tokens = 5;
  EXPECT_DOUBLE_EQ(*ComputeMetrics(record)->tpot_s, 0.8 / 4);
}

TEST(MetricsTest, OneTokenHasNoTpotAndFailuresHaveNoMetrics) {
  EXPECT_FALSE(ComputeMetrics(Completed(0, {0.3}))->tpot_s.has_value());
  EXPECT_FALSE(ComputeMetrics(Failed(0)).has_value());
  RequestRecord empty = Completed(0, {1.0});
  empty.token_s.clear();
  EXPECT_FALSE(ComputeMetrics(empty).has_value());
}

TEST(MetricsTest, ServerPhasesDisaggregated) {
  ServerTiming t{.arrival_us = 1'000'000,
                 .prefill_start_us = 1'050'000,
                 .prefill_end_us = 1'250'000,
                 .kv_transfer_start_us = 1'260'000,
                 .kv_transfer_end_us = 1'290'000,
                 .token_emit_us = {1'250'000, 1'330'000, 1'360'000}};
  const std::optional<PhaseBreakdown> p = ComputePhases(t);
  ASSERT_TRUE(p.has_value());
  EXPECT_NEAR(p->queue_s, 0.05, 1e-12);
  EXPECT_NEAR(p->prefill_s, 0.2, 1e-12);
  EXPECT_NEAR(*p->kv_transfer_s, 0.03, 1e-12);
  EXPECT_NEAR(*p->first_decode_s, 0.04, 1e-12);  // 1.33 s - transfer end 1.29 s
}

TEST(MetricsTest, ServerPhasesColocatedAndIncomplete) {
  ServerTiming t{
      .arrival_us = 10, .prefill_start_us = 20, .prefill_end_us = 70, .token_emit_us = {70, 95}};
  const std::optional<PhaseBreakdown> p = ComputePhases(t);
  ASSERT_TRUE(p.has_value());
  EXPECT_FALSE(p->kv_transfer_s.has_value());
  EXPECT_NEAR(*p->first_decode_s, 25e-6, 1e-12);
  t.prefill_start_us = 0;
  EXPECT_FALSE(ComputePhases(t).has_value());
}

TEST(SummaryTest, PercentilesInterpolateLikeNumpy) {
  const std::vector<double> sorted = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(Percentile(sorted, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(sorted, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile(sorted, 90), 3.7);  // numpy.percentile([1,2,3,4], 90)
  EXPECT_DOUBLE_EQ(Percentile(sorted, 100), 4);
  const Stats stats = ComputeStats({4, 1, 3, 2});
  EXPECT_EQ(stats.count, 4);
  EXPECT_DOUBLE_EQ(stats.mean, 2.5);
  EXPECT_DOUBLE_EQ(stats.p99, 3.97);
  EXPECT_DOUBLE_EQ(stats.min, 1);
  EXPECT_DOUBLE_EQ(stats.max, 4);
  EXPECT_EQ(ComputeStats({}).count, 0);
}

// Four measured requests (one failed), one warm-up, one cancelled.
std::vector<RequestRecord> MixedRun() {
  std::vector<RequestRecord> records = {
      Completed(0.0, {0.1, 0.2, 0.3}),  // TTFT 0.1, TPOT 0.1
      Completed(1.0, {1.4, 1.45}),      // TTFT 0.4, TPOT 0.05
      Completed(2.0, {2.2, 2.6, 3.0}),  // TTFT 0.2, TPOT 0.4
      Failed(3.0),
      Completed(-1.0, {5.0}, /*warmup=*/true),  // would miss everything
  };
  RequestRecord cancelled = Completed(3.5, {3.6});
  cancelled.ok = false;
  cancelled.cancelled = true;
  records.push_back(cancelled);
  return records;
}

TEST(SummaryTest, AttainmentNeedsBothObjectivesAndCountsFailuresAsMisses) {
  const std::vector<RequestRecord> records = MixedRun();
  // TTFT <= 0.25 and TPOT <= 0.15: only the first request.
  EXPECT_DOUBLE_EQ(Attainment(records, {.ttft_s = 0.25, .tpot_s = 0.15}), 0.25);
  // TTFT <= 0.5 and TPOT <= 0.5: three of four (the failure misses).
  EXPECT_DOUBLE_EQ(Attainment(records, {.ttft_s = 0.5, .tpot_s = 0.5}), 0.75);
  // TTFT alone is not enough: the third request's TPOT 0.4 misses 0.3.
  EXPECT_DOUBLE_EQ(Attainment(records, {.ttft_s = 0.5, .tpot_s = 0.3}), 0.5);
  EXPECT_DOUBLE_EQ(Attainment({}, {.ttft_s = 1, .tpot_s = 1}), 0.0);
  // A one-token output meets any TPOT objective.
  EXPECT_DOUBLE_EQ(Attainment({Completed(0, {0.1})}, {.ttft_s = 0.2, .tpot_s = 1e-9}), 1.0);
}

TEST(SummaryTest, SloScaleSweepScalesBothObjectives) {
  const std::vector<SloScalePoint> points =
      SloScaleSweep(MixedRun(), {.ttft_s = 0.2, .tpot_s = 0.1}, {0.5, 1.0, 2.0, 4.0});
  ASSERT_EQ(points.size(), 4u);
  EXPECT_DOUBLE_EQ(points[0].attainment, 0.0);   // 0.1 / 0.05: nobody
  EXPECT_DOUBLE_EQ(points[1].attainment, 0.25);  // 0.2 / 0.1: the first
  EXPECT_DOUBLE_EQ(points[2].attainment, 0.5);   // 0.4 / 0.2: first and second
  EXPECT_DOUBLE_EQ(points[3].attainment, 0.75);  // 0.8 / 0.4: all that completed
  EXPECT_EQ(DefaultSloScales().front(), 0.5);
  EXPECT_EQ(DefaultSloScales().back(), 3.0);
}

TEST(SummaryTest, SummarizeLeavesOutWarmupAndCancelled) {
  DispatchStats dispatch{.max_concurrency = 8, .max_in_flight = 3, .num_delayed_by_cap = 1};
  const RunSummary s = Summarize(MixedRun(), dispatch,
                                 {.label = "disagg",
                                  .workload = "random",
                                  .arrivals = "poisson",
                                  .rate_per_s = 1,
                                  .slo = Slo{.ttft_s = 0.5, .tpot_s = 0.5}});
  EXPECT_EQ(s.num_measured, 4);
  EXPECT_EQ(s.num_completed, 3);
  EXPECT_EQ(s.num_failed, 1);
  EXPECT_EQ(s.num_warmup, 1);
  EXPECT_EQ(s.num_cancelled, 1);
  EXPECT_EQ(s.ttft_s.count, 3);
  EXPECT_NEAR(s.ttft_s.mean, (0.1 + 0.4 + 0.2) / 3, 1e-12);
  EXPECT_NEAR(s.tpot_s.max, 0.4, 1e-12);
  // From the first measured arrival (0.0) to the last token (3.0).
  EXPECT_NEAR(s.measured_duration_s, 3.0, 1e-12);
  EXPECT_NEAR(s.request_throughput, 1.0, 1e-12);
  EXPECT_NEAR(s.output_token_throughput, 8 / 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(s.attainment, 0.75);
  EXPECT_EQ(s.slo_scales.size(), DefaultSloScales().size());
  EXPECT_FALSE(s.queue_s.has_value());
  EXPECT_THAT(s.errors, ElementsAre("UNAVAILABLE: worker gone"));
  const std::string text = FormatSummary(s);
  EXPECT_THAT(text, HasSubstr("3 completed, 1 failed"));
  EXPECT_THAT(text, HasSubstr("SLO attainment: 75.0%"));
  EXPECT_THAT(text, HasSubstr("CAP HIT: 1 requests"));
}

TEST(SummaryTest, PhasesAppearWhenEveryRequestHasThem) {
  RequestRecord record = Completed(0, {0.3, 0.4});
  record.server = ServerTiming{.arrival_us = 100,
                               .prefill_start_us = 200,
                               .prefill_end_us = 400,
                               .token_emit_us = {400, 500}};
  const RunSummary s = Summarize({record, record}, {}, {});
  ASSERT_TRUE(s.queue_s.has_value());
  EXPECT_NEAR(s.queue_s->mean, 100e-6, 1e-12);
  EXPECT_NEAR(s.prefill_s->mean, 200e-6, 1e-12);
  EXPECT_FALSE(s.kv_transfer_s.has_value());
  EXPECT_NEAR(s.first_decode_s->p50, 100e-6, 1e-12);
  EXPECT_THAT(FormatSummary(s), HasSubstr("server prefill"));
}

}  // namespace
}  // namespace baton::bench
