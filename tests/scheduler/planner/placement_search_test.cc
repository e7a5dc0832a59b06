#include "scheduler/planner/placement_search.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/scheduler/planner/planner_test_util.h"

namespace baton::scheduler::planner {
namespace {

using testing::TestCoefficients;
using testing::TestDevice;
using testing::TestModel;

TEST(GoodputByBisectionTest, FindsTheEdgeOfAStepWithinTheTolerance) {
  int calls = 0;
  absl::StatusOr<double> goodput = GoodputByBisection(
      [&](double rate) -> absl::StatusOr<double> {
        ++calls;
        return rate <= 3.7 ? 1.0 : 0.0;
      },
      0.9, /*initial_rate=*/1.0, /*rel_tolerance=*/0.01);
  ASSERT_TRUE(goodput.ok());
  EXPECT_LE(*goodput, 3.7);
  EXPECT_GE(*goodput, 3.7 / 1.01);
  EXPECT_LT(calls, 15);
}

TEST(GoodputByBisectionTest, ZeroWhenEvenTheLowestRateMisses) {
  absl::StatusOr<double> goodput =
      GoodputByBisection([](double) -> absl::StatusOr<double> { return 0.5; }, 0.9, 1.0, 0.05);
  ASSERT_TRUE(goodput.ok());
  EXPECT_EQ(*goodput, 0.0);
}

TEST(GoodputByBisectionTest, HalvesDownFromAnInitialRateThatMisses) {
  absl::StatusOr<double> goodput = GoodputByBisection(
      [](double rate) -> absl::StatusOr<double> { return rate <= 0.3 ? 1.0 : 0.0; }, 0.9, 100.0, 0.02);
  ASSERT_TRUE(goodput.ok());
  EXPECT_NEAR(*goodput, 0.3, 0.3 * 0.02);
}

// Evenly spaced arrivals (one per second at rate 1): no queueing below a phase's capacity.
std::vector<SimRequest> EvenRequests(int n, int input_len, int output_len) {
  std::vector<SimRequest> out;
  for (int i = 0; i < n; ++i) out.push_back({.arrival_s = double(i), .input_len = input_len, .output_len = output_len});
  return out;
}

// Hand-checkable: a prompt of 100 tokens takes 100 ms on tp 1 (50 ms on tp 2), so a prefill
// instance alone meets TTFT <= 150 ms up to 10 req/s (20 on tp 2: the same per device; tp 1 wins
// on fewer devices). A decode step takes 5 + 1 ms per sequence (half on tp 2); with TPOT <= 20 ms
// a tp-1 instance holds 15 sequences of 10 steps each: 15 / (10 x 20 ms) = 75 req/s.
class PlacementSearchTest : public ::testing::Test {
 protected:
  StepLatencyModel model_{TestCoefficients({.b_ms = 1.0}, {.a_ms = 5, .c_ms = 1}), TestModel(), TestDevice()};
  std::vector<SimRequest> requests_ = EvenRequests(600, 100, 11);
  PlanOptions options_{.slo = {.ttft_s = 0.15, .tpot_s = 0.02}, .tps = {1, 2}, .max_pp = 1,
                       .rel_tolerance = 0.01};
};

TEST_F(PlacementSearchTest, HighAffinityPicksEachPhasesBestPerDeviceAndBalancesTheCounts) {
  absl::StatusOr<PlanReport> report = PlanPlacement(model_, {.num_nodes = 1, .devices_per_node = 8},
                                                    requests_, options_);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_FALSE(report->disaggregated.empty());
  const Placement& best = report->disaggregated[0];
  EXPECT_EQ(best.prefill.parallelism, (Parallelism{1, 1}));
  EXPECT_NEAR(best.prefill.goodput_alone, 10.0, 0.2);
  EXPECT_EQ(best.decode.parallelism, (Parallelism{1, 1}));
  EXPECT_NEAR(best.decode.goodput_alone, 75.0, 3.0);
  // 7 prefill instances (70 req/s) feed one decode instance (75 req/s) on the 8 devices.
  EXPECT_EQ(best.prefill.num_instances, 7);
  EXPECT_EQ(best.decode.num_instances, 1);
  EXPECT_EQ(best.num_devices, 8);
  EXPECT_NEAR(best.goodput, 70.0, 3.5);  // the whole deployment simulated: routing, KV transfer
  EXPECT_EQ(best.binding_phase, "prefill");
  EXPECT_GE(best.predicted_attainment, 0.9);
}

// A phase's best configuration per device may be too large to share the cluster: here decode on
// tp 2 is cheaper per device than on tp 1, but with 2 devices it leaves none to prefill on. The
// pairs come from every configuration of each phase, so the one that fits is found even when a
// single pair is simulated whole.
TEST_F(PlacementSearchTest, PairsAreDrawnFromEveryConfigurationNotOnlyEachPhasesBest) {
  LatencyCoefficients coefficients = TestCoefficients({.b_ms = 1.0}, {.a_ms = 5, .c_ms = 1});
  coefficients.by_tp[2].decode = {.a_ms = 1, .b_ms = 0, .c_ms = 0.25};
  const StepLatencyModel model(coefficients, TestModel(), TestDevice());
  PlanOptions options = options_;
  options.num_verified = 1;
  absl::StatusOr<PlanReport> report =
      PlanPlacement(model, {.num_nodes = 1, .devices_per_node = 2}, requests_, options);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->disaggregated.size(), 1u);
  const Placement& best = report->disaggregated[0];
  EXPECT_EQ(best.prefill.parallelism, (Parallelism{1, 1}));
  EXPECT_EQ(best.decode.parallelism, (Parallelism{1, 1}));
  EXPECT_EQ(best.num_devices, 2);
  EXPECT_GT(best.goodput, 0);
}

TEST_F(PlacementSearchTest, ARateSetsTheInstanceCounts) {
  options_.rate = 20.0;
  absl::StatusOr<PlanReport> report = PlanPlacement(model_, {.num_nodes = 1, .devices_per_node = 8},
                                                    requests_, options_);
  ASSERT_TRUE(report.ok()) << report.status();
  const Placement& best = report->disaggregated[0];
  // 20 req/s of prefill: two tp-1 instances or one tp-2 instance, two devices either way.
  EXPECT_EQ(best.prefill.num_devices(), 2);
  EXPECT_EQ(best.decode.num_instances, 1);
  EXPECT_EQ(best.rate, 20.0);
  EXPECT_GE(best.predicted_attainment, 0.9);
}

TEST_F(PlacementSearchTest, ColocatedBaselineIsRankedToo) {
  absl::StatusOr<PlanReport> report = PlanPlacement(model_, {.num_nodes = 1, .devices_per_node = 2},
                                                    requests_, options_);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_FALSE(report->colocated.empty());
  for (size_t i = 1; i < report->colocated.size(); ++i) {
    EXPECT_GE(report->colocated[i - 1].goodput_per_device, report->colocated[i].goodput_per_device);
  }
  EXPECT_TRUE(report->colocated[0].colocated);
}

TEST_F(PlacementSearchTest, LowAffinityKeepsEveryTransferOnANode) {
  options_.affinity = Affinity::kLow;
  options_.max_pp = 2;
  absl::StatusOr<PlanReport> report = PlanPlacement(model_, {.num_nodes = 2, .devices_per_node = 4},
                                                    requests_, options_);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_FALSE(report->disaggregated.empty());
  for (const Placement& p : report->disaggregated) {
    EXPECT_TRUE(p.kv_same_node);
    EXPECT_EQ(p.prefill.parallelism.pp, p.decode.parallelism.pp);
    EXPECT_LE(p.num_devices, 8);
  }
}

TEST_F(PlacementSearchTest, SameInputsGiveTheSamePlan) {
  absl::StatusOr<PlanReport> a = PlanPlacement(model_, {.num_nodes = 1, .devices_per_node = 4}, requests_, options_);
  absl::StatusOr<PlanReport> b = PlanPlacement(model_, {.num_nodes = 1, .devices_per_node = 4}, requests_, options_);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->disaggregated.size(), b->disaggregated.size());
  for (size_t i = 0; i < a->disaggregated.size(); ++i) {
    EXPECT_EQ(a->disaggregated[i].goodput, b->disaggregated[i].goodput);
    EXPECT_EQ(a->disaggregated[i].prefill.num_instances, b->disaggregated[i].prefill.num_instances);
  }
}

TEST_F(PlacementSearchTest, RejectsBadOptionsAndModelsThatDoNotFit) {
  PlanOptions bad = options_;
  bad.slo.ttft_s = 0;
  EXPECT_EQ(PlanPlacement(model_, {.num_nodes = 1, .devices_per_node = 1}, requests_, bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanPlacement(model_, {.num_nodes = 0, .devices_per_node = 1}, requests_, options_).status().code(),
            absl::StatusCode::kInvalidArgument);
  DeviceSpec small = TestDevice();
  small.memory_bytes = 1 << 20;  // 1 MiB: the weights do not fit
  const StepLatencyModel tight(TestCoefficients({.b_ms = 1.0}, {.a_ms = 5}), TestModel(), small);
  EXPECT_EQ(PlanPlacement(tight, {.num_nodes = 1, .devices_per_node = 2}, requests_, options_).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace baton::scheduler::planner
