// Arrival processes: the rate and the burstiness of the gaps within statistical bounds for fixed
// seeds, reproducibility, and the scaling that makes runs at different rates comparable.
#include "benchmarks/bench/arrivals.h"

#include <cmath>
#include <numeric>
#include <vector>

#include "benchmarks/bench/rng.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace baton::bench {
namespace {

using ::absl_testing::StatusIs;
using ::testing::HasSubstr;

struct GapMoments {
  double mean = 0;
  double cv2 = 0;  // variance / mean^2
};

GapMoments Moments(const std::vector<double>& times) {
  std::vector<double> gaps;
  for (size_t i = 1; i < times.size(); ++i) gaps.push_back(times[i] - times[i - 1]);
  const double mean = std::accumulate(gaps.begin(), gaps.end(), 0.0) / gaps.size();
  double var = 0;
  for (double g : gaps) var += (g - mean) * (g - mean);
  var /= gaps.size() - 1;
  return {.mean = mean, .cv2 = var / (mean * mean)};
}

TEST(ArrivalsTest, FirstArrivalAtZeroAndNonDecreasing) {
  for (ArrivalKind kind : {ArrivalKind::kPoisson, ArrivalKind::kGamma, ArrivalKind::kConstant}) {
    absl::StatusOr<std::vector<double>> times =
        GenerateArrivalTimes({.kind = kind, .rate_per_s = 3, .burstiness = 0.3}, 500, 7);
    ASSERT_TRUE(times.ok()) << times.status();
    ASSERT_EQ(times->size(), 500u);
    EXPECT_EQ(times->front(), 0.0);
    for (size_t i = 1; i < times->size(); ++i) EXPECT_GE((*times)[i], (*times)[i - 1]);
  }
}

// 20,000 exponential gaps: the sample mean's standard error is 0.7% of the mean, the sample CV^2's
// about 2%; the bounds are 5 standard errors.
TEST(ArrivalsTest, PoissonRateAndDispersionWithinBounds) {
  for (uint64_t seed : {0u, 1u, 42u}) {
    absl::StatusOr<std::vector<double>> times =
        GenerateArrivalTimes({.kind = ArrivalKind::kPoisson, .rate_per_s = 5}, 20001, seed);
    ASSERT_TRUE(times.ok());
    const GapMoments m = Moments(*times);
    EXPECT_NEAR(m.mean, 0.2, 0.2 * 0.035) << "seed " << seed;
    EXPECT_NEAR(m.cv2, 1.0, 0.1) << "seed " << seed;
  }
}

// Gamma gaps of shape k have CV^2 = 1/k: burstiness 0.25 is four times as variable as Poisson,
// burstiness 4 a quarter. The mean stays 1 / rate.
TEST(ArrivalsTest, GammaBurstinessSetsTheVarianceNotTheRate) {
  struct Case {
    double burstiness;
    double cv2_tolerance;
  };
  for (const Case& c : {Case{0.25, 0.6}, Case{0.5, 0.25}, Case{1.0, 0.1}, Case{4.0, 0.02}}) {
    absl::StatusOr<std::vector<double>> times = GenerateArrivalTimes(
        {.kind = ArrivalKind::kGamma, .rate_per_s = 2, .burstiness = c.burstiness}, 50001, 3);
    ASSERT_TRUE(times.ok());
    const GapMoments m = Moments(*times);
    EXPECT_NEAR(m.mean, 0.5, 0.5 * 0.05) << "burstiness " << c.burstiness;
    EXPECT_NEAR(m.cv2, 1.0 / c.burstiness, c.cv2_tolerance) << "burstiness " << c.burstiness;
  }
}

TEST(ArrivalsTest, ConstantGapsAreExact) {
  absl::StatusOr<std::vector<double>> times =
      GenerateArrivalTimes({.kind = ArrivalKind::kConstant, .rate_per_s = 4}, 1001, 0);
  ASSERT_TRUE(times.ok());
  for (size_t i = 0; i < times->size(); ++i) EXPECT_DOUBLE_EQ((*times)[i], i * 0.25);
}

TEST(ArrivalsTest, SameSeedSameTimesOtherSeedOtherTimes) {
  const ArrivalSpec spec{.kind = ArrivalKind::kGamma, .rate_per_s = 1, .burstiness = 0.5};
  EXPECT_EQ(*GenerateArrivalTimes(spec, 100, 9), *GenerateArrivalTimes(spec, 100, 9));
  EXPECT_NE(*GenerateArrivalTimes(spec, 100, 9), *GenerateArrivalTimes(spec, 100, 10));
}

// Common random numbers: with one seed, the times at rate 2r are those at rate r halved.
TEST(ArrivalsTest, DoublingTheRateHalvesEveryTime) {
  for (ArrivalKind kind : {ArrivalKind::kPoisson, ArrivalKind::kGamma}) {
    const std::vector<double> slow =
        *GenerateArrivalTimes({.kind = kind, .rate_per_s = 1, .burstiness = 0.5}, 200, 5);
    const std::vector<double> fast =
        *GenerateArrivalTimes({.kind = kind, .rate_per_s = 2, .burstiness = 0.5}, 200, 5);
    for (size_t i = 0; i < slow.size(); ++i)
      EXPECT_NEAR(fast[i], slow[i] / 2, 1e-9 * (1 + slow[i]));
  }
}

TEST(ArrivalsTest, RescaleToRateKeepsTheShape) {
  const std::vector<double> trace = {10, 11, 15, 16, 30};  // 4 gaps over 20 s: 0.2 req/s
  absl::StatusOr<std::vector<double>> scaled = RescaleToRate(trace, 2.0);
  ASSERT_TRUE(scaled.ok());
  EXPECT_THAT(*scaled, ::testing::Pointwise(::testing::DoubleNear(1e-12),
                                            std::vector<double>{0, 0.1, 0.5, 0.6, 2.0}));
  EXPECT_THAT(RescaleToRate({1.0}, 1.0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RescaleToRate({1.0, 1.0}, 1.0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RescaleToRate(trace, 0), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ArrivalsTest, InvalidSpecsAreRejected) {
  EXPECT_THAT(GenerateArrivalTimes({.rate_per_s = 0}, 10, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rate")));
  EXPECT_THAT(GenerateArrivalTimes({.rate_per_s = INFINITY}, 10, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rate")));
  EXPECT_THAT(
      GenerateArrivalTimes({.kind = ArrivalKind::kGamma, .rate_per_s = 1, .burstiness = 0}, 10, 0),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("burstiness")));
  EXPECT_THAT(GenerateArrivalTimes({.rate_per_s = 1}, -1, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseArrivalKind("bursty"), StatusIs(absl::StatusCode::kInvalidArgument,
                                                   HasSubstr("poisson, gamma or constant")));
  EXPECT_EQ(*ParseArrivalKind("gamma"), ArrivalKind::kGamma);
}

// The generator's draws: moments of the distributions it is built from.
TEST(RngTest, GammaAndUniformMoments) {
  Rng rng(11);
  for (double shape : {0.3, 1.0, 2.5}) {
    double sum = 0;
    double sum2 = 0;
    constexpr int kN = 100000;
    for (int i = 0; i < kN; ++i) {
      const double x = rng.Gamma(shape, 2.0);
      sum += x;
      sum2 += x * x;
    }
    const double mean = sum / kN;
    const double var = sum2 / kN - mean * mean;
    EXPECT_NEAR(mean, 2.0 * shape, 0.03 * 2.0 * shape) << "shape " << shape;
    EXPECT_NEAR(var, 4.0 * shape, 0.08 * 4.0 * shape) << "shape " << shape;
  }
  int counts[3] = {0, 0, 0};
  for (int i = 0; i < 30000; ++i) ++counts[rng.UniformInt(-1, 1) + 1];
  for (int count : counts) EXPECT_NEAR(count, 10000, 500);
  EXPECT_NE(DeriveSeed(1, 0), DeriveSeed(1, 1));
  EXPECT_NE(DeriveSeed(1, 0), DeriveSeed(2, 0));
}

}  // namespace
}  // namespace baton::bench
