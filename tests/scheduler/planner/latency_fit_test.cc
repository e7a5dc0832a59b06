// The relative-error least-squares fit: exact recovery, noise, the non-negativity constraint, the
// error paths, and why relative rather than absolute error.
#include "scheduler/planner/latency_fit.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace baton::scheduler::planner {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;

// Deterministic noise: a fixed pattern in [-1, 1].
double Noise(int i) { return std::sin(1.7 * i + 0.3); }

void ExpectRelativelyNear(double actual, double expected, double rel, const char* what) {
  EXPECT_NEAR(actual, expected, rel * std::abs(expected)) << what;
}

// Prefill batches of `batch` prompts of `len` tokens each, the engine profiler's grid shape.
std::vector<PrefillSample> PrefillGrid(const PrefillCoefficients& c, double noise) {
  std::vector<PrefillSample> samples;
  int i = 0;
  for (int len : {16, 64, 128, 256, 512, 1024}) {
    for (int batch : {1, 2, 4}) {
      const double sum = 1.0 * batch * len;
      const double sum_sq = 1.0 * batch * len * len;
      const double ms = c.a_ms + c.b_ms * sum + c.c_ms * sum_sq;
      samples.push_back({sum, sum_sq, ms * (1 + noise * Noise(i++))});
    }
  }
  return samples;
}

std::vector<DecodeSample> DecodeGrid(const DecodeCoefficients& c, double noise) {
  std::vector<DecodeSample> samples;
  int i = 0;
  for (int batch : {1, 4, 16, 64}) {
    for (int context : {32, 256, 1024, 2048}) {
      const double sum = 1.0 * batch * context;
      const double ms = c.a_ms + c.b_ms * sum + c.c_ms * batch;
      samples.push_back({batch, sum, ms * (1 + noise * Noise(i++))});
    }
  }
  return samples;
}

TEST(LatencyFitTest, RecoversPrefillCoefficientsExactlyWithoutNoise) {
  // DistServe's OPT-13B tp 1 prefill magnitudes: Σ tokens² ~1e6 times Σ tokens.
  const PrefillCoefficients truth{.a_ms = 11.0, .b_ms = 0.0875, .c_ms = 1.9e-5};
  const auto fit = FitPrefill(PrefillGrid(truth, 0));
  ASSERT_THAT(fit, IsOk());
  ExpectRelativelyNear(fit->a_ms, truth.a_ms, 1e-6, "a");
  ExpectRelativelyNear(fit->b_ms, truth.b_ms, 1e-6, "b");
  ExpectRelativelyNear(fit->c_ms, truth.c_ms, 1e-6, "c");
  EXPECT_LT(RelativeRmsError(*fit, PrefillGrid(truth, 0)), 1e-9);
}

TEST(LatencyFitTest, RecoversDecodeCoefficientsExactlyWithoutNoise) {
  const DecodeCoefficients truth{.a_ms = 18.0, .b_ms = 2.4e-4, .c_ms = 0.12};
  const auto fit = FitDecode(DecodeGrid(truth, 0));
  ASSERT_THAT(fit, IsOk());
  ExpectRelativelyNear(fit->a_ms, truth.a_ms, 1e-6, "a");
  ExpectRelativelyNear(fit->b_ms, truth.b_ms, 1e-6, "b");
  ExpectRelativelyNear(fit->c_ms, truth.c_ms, 1e-6, "c");
}

TEST(LatencyFitTest, TwoPercentNoiseMovesTheCoefficientsByAFewPercent) {
  const PrefillCoefficients prefill_truth{.a_ms = 11.0, .b_ms = 0.0875, .c_ms = 1.9e-5};
  const auto prefill = FitPrefill(PrefillGrid(prefill_truth, 0.02));
  ASSERT_THAT(prefill, IsOk());
  ExpectRelativelyNear(prefill->a_ms, prefill_truth.a_ms, 0.05, "prefill a");
  ExpectRelativelyNear(prefill->b_ms, prefill_truth.b_ms, 0.05, "prefill b");
  ExpectRelativelyNear(prefill->c_ms, prefill_truth.c_ms, 0.05, "prefill c");
  EXPECT_LT(RelativeRmsError(*prefill, PrefillGrid(prefill_truth, 0.02)), 0.02);

  const DecodeCoefficients decode_truth{.a_ms = 18.0, .b_ms = 2.4e-4, .c_ms = 0.12};
  const auto decode = FitDecode(DecodeGrid(decode_truth, 0.02));
  ASSERT_THAT(decode, IsOk());
  ExpectRelativelyNear(decode->a_ms, decode_truth.a_ms, 0.05, "decode a");
  ExpectRelativelyNear(decode->b_ms, decode_truth.b_ms, 0.05, "decode b");
  ExpectRelativelyNear(decode->c_ms, decode_truth.c_ms, 0.05, "decode c");
  EXPECT_LT(RelativeRmsError(*decode, DecodeGrid(decode_truth, 0.02)), 0.02);
}

TEST(LatencyFitTest, ANegativeTermIsClampedToZeroAndTheRestRefitted) {
  // Step times that shrink per sequence: the unconstrained fit has c < 0.
  const DecodeCoefficients truth{.a_ms = 20.0, .b_ms = 1e-3, .c_ms = -0.1};
  const auto fit = FitDecode(DecodeGrid(truth, 0));
  ASSERT_THAT(fit, IsOk());
  EXPECT_EQ(fit->c_ms, 0.0);
  EXPECT_GT(fit->a_ms, 0.0);
  EXPECT_GT(fit->b_ms, 0.0);
  // The refit is the best with c = 0, so no worse than the truth with its c zeroed.
  const DecodeCoefficients zeroed{.a_ms = truth.a_ms, .b_ms = truth.b_ms, .c_ms = 0};
  EXPECT_LE(RelativeRmsError(*fit, DecodeGrid(truth, 0)),
            RelativeRmsError(zeroed, DecodeGrid(truth, 0)));

  // Prefill with no fixed cost: a true 0 stays >= 0 (rounding must not make it negative).
  const PrefillCoefficients no_overhead{.a_ms = 0, .b_ms = 0.05, .c_ms = 1e-5};
  const auto prefill = FitPrefill(PrefillGrid(no_overhead, 0));
  ASSERT_THAT(prefill, IsOk());
  EXPECT_GE(prefill->a_ms, 0.0);
  ExpectRelativelyNear(prefill->b_ms, no_overhead.b_ms, 1e-6, "b");
}

TEST(LatencyFitTest, TooFewSamplesIsInvalidArgument) {
  const std::vector<DecodeSample> two = {{1, 100, 5.0}, {4, 800, 7.0}};
  EXPECT_THAT(FitDecode(two), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("2 samples")));
  EXPECT_THAT(FitPrefill({}), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("0 samples")));
}

TEST(LatencyFitTest, NonPositiveTimeIsInvalidArgument) {
  std::vector<DecodeSample> samples = DecodeGrid({.a_ms = 5, .b_ms = 1e-3, .c_ms = 0.1}, 0);
  samples[3].ms = 0;
  EXPECT_THAT(FitDecode(samples),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sample 3")));
  samples[3].ms = -1;
  EXPECT_THAT(FitDecode(samples), StatusIs(absl::StatusCode::kInvalidArgument));
  samples[3].ms = std::nan("");
  EXPECT_THAT(FitDecode(samples), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(LatencyFitTest, SamplesThatCannotSeparateTheTermsAreInvalidArgument) {
  // Every batch the same shape.
  const std::vector<PrefillSample> same = {
      {128, 16384, 10.0}, {128, 16384, 10.2}, {128, 16384, 9.9}};
  EXPECT_THAT(FitPrefill(same),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("do not determine")));
  // One context length for every batch size: Σ context is a multiple of the batch size.
  std::vector<DecodeSample> one_context;
  for (int batch : {1, 2, 4, 8}) one_context.push_back({batch, batch * 512.0, 5.0 + batch});
  EXPECT_THAT(FitDecode(one_context),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("do not determine")));
}

// Plain (unweighted) least squares on the decode terms, for comparison: the 3x3 normal equations
// by Cramer's rule.
DecodeCoefficients PlainLeastSquares(const std::vector<DecodeSample>& samples) {
  double g[3][3] = {}, r[3] = {};
  for (const DecodeSample& s : samples) {
    const double x[3] = {1.0, s.sum_context, static_cast<double>(s.batch_size)};
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) g[i][j] += x[i] * x[j];
      r[i] += x[i] * s.ms;
    }
  }
  auto det = [](const double m[3][3]) {
    return m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
           m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
           m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
  };
  double theta[3];
  for (int k = 0; k < 3; ++k) {
    double m[3][3];
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) m[i][j] = j == k ? r[i] : g[i][j];
    }
    theta[k] = det(m) / det(g);
  }
  return {.a_ms = theta[0], .b_ms = theta[1], .c_ms = theta[2]};
}

TEST(LatencyFitTest, RelativeErrorKeepsTheShortStepsAccurateBesideHugeOnes) {
  // Timing noise is proportional to the step (±5% here): on a 500 ms step it is 25 ms, ten times
  // a whole short step. Plain least squares spends its intercept on the huge steps' noise and
  // misses the short steps, which make TPOT; the relative fit weighs every step alike.
  const DecodeCoefficients line{.a_ms = 2.0, .b_ms = 1e-3, .c_ms = 0.05};
  std::vector<DecodeSample> small, all;
  int i = 0;
  auto add = [&](int batch, int context, std::vector<DecodeSample>* out) {
    const double sum = 1.0 * batch * context;
    const double ms = line.a_ms + line.b_ms * sum + line.c_ms * batch;
    out->push_back({batch, sum, ms * (1 + 0.05 * Noise(i++))});
  };
  for (int batch : {1, 2, 4, 8}) {
    for (int context : {16, 64, 128}) add(batch, context, &small);
  }
  all = small;
  for (int context : {1024, 2048, 4096}) add(256, context, &all);

  const auto fit = FitDecode(all);
  ASSERT_THAT(fit, IsOk());
  const double relative_fit_error = RelativeRmsError(*fit, small);
  const double plain_fit_error = RelativeRmsError(PlainLeastSquares(all), small);
  EXPECT_LT(relative_fit_error, 0.05);  // the noise itself is ~3.5% RMS
  EXPECT_LT(relative_fit_error, plain_fit_error / 3) << plain_fit_error;
}

}  // namespace
}  // namespace baton::scheduler::planner
