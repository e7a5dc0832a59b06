#include "scheduler/global/latency_model.h"

#include <optional>
#include <string>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::scheduler {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::Optional;

constexpr double kTol = 1e-9;
const std::string kPrefill = "prefill worker 0";
const std::string kDecode = "decode worker 0";

// Microseconds from seconds, for readable observations.
int64_t Us(double seconds) { return static_cast<int64_t>(seconds * 1e6); }

TEST(LatencyModelTest, PredictsNothingBeforeAnyObservation) {
  const LatencyModel model;
  EXPECT_EQ(model.PrefillTokensPerSecond(kPrefill), std::nullopt);
  EXPECT_EQ(model.DecodeFit(kDecode), std::nullopt);
  EXPECT_EQ(model.PredictDecodeStepMs(kDecode, 1), std::nullopt);
  EXPECT_TRUE(model.Estimates().empty());
}

TEST(LatencyModelTest, FirstPrefillIsItsOwnRate) {
  LatencyModel model;
  model.ObservePrefill(kPrefill, 1000, Us(10), Us(10.5));
  EXPECT_THAT(model.PrefillTokensPerSecond(kPrefill), Optional(DoubleNear(2000, kTol)));
  // A prefill-only instance has no decode fit.
  EXPECT_EQ(model.DecodeFit(kPrefill), std::nullopt);
}

TEST(LatencyModelTest, PrefillThroughputIsEwmaOfTokensOverEwmaOfSeconds) {
  LatencyModel model({.prefill_alpha = 0.5});
  // tokens EWMA 100 -> 200 -> 150; seconds EWMA 0.1 -> 0.1 -> 0.15.
  model.ObservePrefill(kPrefill, 100, Us(1), Us(1.1));
  EXPECT_THAT(model.PrefillTokensPerSecond(kPrefill), Optional(DoubleNear(1000, 1e-6)));
  model.ObservePrefill(kPrefill, 300, Us(2), Us(2.1));
  EXPECT_THAT(model.PrefillTokensPerSecond(kPrefill), Optional(DoubleNear(2000, 1e-6)));
  model.ObservePrefill(kPrefill, 100, Us(3), Us(3.2));
  EXPECT_THAT(model.PrefillTokensPerSecond(kPrefill), Optional(DoubleNear(1000, 1e-6)));

  // alpha 0.2 after the first sample: tokens 0.8 * 1000 + 0.2 * 10, seconds 0.8 * 1 + 0.2 * 0.01.
  LatencyModel weighted({.prefill_alpha = 0.2});
  weighted.ObservePrefill(kPrefill, 1000, Us(1), Us(2));
  weighted.ObservePrefill(kPrefill, 10, Us(3), Us(3.01));
  EXPECT_THAT(weighted.PrefillTokensPerSecond(kPrefill),
              Optional(DoubleNear((0.8 * 1000 + 0.2 * 10) / (0.8 * 1 + 0.2 * 0.01), 1e-6)));
}

TEST(LatencyModelTest, PrefillsOfOneEngineStepCountAsOneSample) {
  LatencyModel model({.prefill_alpha = 0.5});
  model.ObservePrefill(kPrefill, 100, Us(1), Us(1.1));  // 1000 tokens/s
  // Three requests of one step (same start; their ends differ by when each RPC returned): one
  // sample of 600 tokens in 0.2 s (the latest end).
  model.ObservePrefill(kPrefill, 100, Us(2), Us(2.199));
  model.ObservePrefill(kPrefill, 200, Us(2), Us(2.2));
  model.ObservePrefill(kPrefill, 300, Us(2), Us(2.15));
  EXPECT_THAT(model.PrefillTokensPerSecond(kPrefill),
              Optional(DoubleNear((0.5 * 100 + 0.5 * 600) / (0.5 * 0.1 + 0.5 * 0.2), 1e-6)));
  EXPECT_THAT(model.Estimates(),
              ElementsAre(Field(&InstanceEstimate::num_prefill_samples, 2)));
}

TEST(LatencyModelTest, InvalidObservationsAreIgnored) {
  LatencyModel model;
  model.ObservePrefill(kPrefill, 100, Us(1), Us(1));    // zero duration
  model.ObservePrefill(kPrefill, 100, Us(2), Us(1));    // negative duration
  model.ObservePrefill(kPrefill, 0, Us(1), Us(2));      // no tokens
  model.ObservePrefill(kPrefill, -5, Us(1), Us(2));
  model.ObserveDecodeStep(kDecode, 1, 0);               // zero gap
  model.ObserveDecodeStep(kDecode, 1, -100);
  model.ObserveDecodeStep(kDecode, 0, 1000);            // no batch
  EXPECT_EQ(model.PrefillTokensPerSecond(kPrefill), std::nullopt);
  EXPECT_EQ(model.DecodeFit(kDecode), std::nullopt);
  EXPECT_TRUE(model.Estimates().empty());

  // Nor do they disturb an estimate.
  model.ObservePrefill(kPrefill, 500, Us(5), Us(5.25));
  model.ObserveDecodeStep(kDecode, 2, 8000);
  model.ObservePrefill(kPrefill, 500, Us(6), Us(6));
  model.ObservePrefill(kPrefill, 500, Us(5), Us(5));  // same start as the sample, zero duration
  model.ObserveDecodeStep(kDecode, 2, 0);
  EXPECT_THAT(model.PrefillTokensPerSecond(kPrefill), Optional(DoubleNear(2000, kTol)));
  EXPECT_THAT(model.PredictDecodeStepMs(kDecode, 2), Optional(DoubleNear(8, kTol)));
}

TEST(LatencyModelTest, InstancesAreSeparate) {
  LatencyModel model;
  model.ObservePrefill("prefill worker 0", 100, Us(1), Us(1.1));
  model.ObservePrefill("prefill worker 1", 100, Us(1), Us(1.4));  // same start, other instance
  model.ObserveDecodeStep("decode worker 0", 1, 5000);
  model.ObserveDecodeStep("decode worker 1", 1, 20000);
  EXPECT_THAT(model.PrefillTokensPerSecond("prefill worker 0"), Optional(DoubleNear(1000, 1e-6)));
  EXPECT_THAT(model.PrefillTokensPerSecond("prefill worker 1"), Optional(DoubleNear(250, 1e-6)));
  EXPECT_THAT(model.PredictDecodeStepMs("decode worker 0", 1), Optional(DoubleNear(5, kTol)));
  EXPECT_THAT(model.PredictDecodeStepMs("decode worker 1", 1), Optional(DoubleNear(20, kTol)));
  EXPECT_EQ(model.PrefillTokensPerSecond("decode worker 0"), std::nullopt);
  EXPECT_EQ(model.PrefillTokensPerSecond("prefill worker 2"), std::nullopt);
}

TEST(LatencyModelTest, DecodeStepIsTheLeastSquaresLineOverBatchSize) {
  LatencyModel model;
  // gap = 4 ms + 1.5 ms * batch, twice per batch size, with noise that cancels in the fit.
  for (int batch = 1; batch <= 8; ++batch) {
    const double ms = 4 + 1.5 * batch;
    model.ObserveDecodeStep(kDecode, batch, static_cast<int64_t>((ms + 0.25) * 1000));
    model.ObserveDecodeStep(kDecode, batch, static_cast<int64_t>((ms - 0.25) * 1000));
  }
  const std::optional<DecodeStepFit> fit = model.DecodeFit(kDecode);
  ASSERT_TRUE(fit.has_value());
  EXPECT_NEAR(fit->intercept_ms, 4, 1e-9);
  EXPECT_NEAR(fit->slope_ms, 1.5, 1e-9);
  EXPECT_EQ(fit->num_observations, 16);
  EXPECT_THAT(model.PredictDecodeStepMs(kDecode, 20), Optional(DoubleNear(34, 1e-9)));
}

TEST(LatencyModelTest, DecodeStepNeverCostsLessThanNothing) {
  // Small batches stepping much faster than a line through the big ones predicts: least squares
  // would put the intercept below zero (the "decode step -14.6 ms" of a log line); the fit goes
  // through the origin instead.
  LatencyModel model;
  for (const auto& [batch, ms] : {std::pair{1, 1.0}, std::pair{2, 1.0}, std::pair{30, 60.0}, std::pair{32, 64.0}}) {
    model.ObserveDecodeStep(kDecode, batch, static_cast<int64_t>(ms * 1000));
  }
  const std::optional<DecodeStepFit> fit = model.DecodeFit(kDecode);
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->intercept_ms, 0);
  EXPECT_NEAR(fit->slope_ms, (1.0 + 2.0 + 30 * 60.0 + 32 * 64.0) / (1 + 4 + 900 + 1024), 1e-9);
  EXPECT_GT(*model.PredictDecodeStepMs(kDecode, 1), 0);
}

TEST(LatencyModelTest, DecodeStepWithoutUsableSlopeIsTheMean) {
  LatencyModel one_batch_size;
  one_batch_size.ObserveDecodeStep(kDecode, 3, 4000);
  one_batch_size.ObserveDecodeStep(kDecode, 3, 6000);
  EXPECT_THAT(one_batch_size.DecodeFit(kDecode),
              Optional(AllOf(Field(&DecodeStepFit::intercept_ms, DoubleNear(5, kTol)),
                             Field(&DecodeStepFit::slope_ms, 0.0))));
  EXPECT_THAT(one_batch_size.PredictDecodeStepMs(kDecode, 7), Optional(DoubleNear(5, kTol)));

  // Noise that makes bigger batches look faster does not make them predict faster: slope 0.
  LatencyModel falling;
  falling.ObserveDecodeStep(kDecode, 1, 9000);
  falling.ObserveDecodeStep(kDecode, 4, 7000);
  EXPECT_THAT(falling.DecodeFit(kDecode),
              Optional(AllOf(Field(&DecodeStepFit::intercept_ms, DoubleNear(8, kTol)),
                             Field(&DecodeStepFit::slope_ms, 0.0))));
}

TEST(LatencyModelTest, DecodeFitForgetsObservationsOutsideTheWindow) {
  LatencyModel model({.decode_window = 4});
  for (int i = 0; i < 4; ++i) model.ObserveDecodeStep(kDecode, 1 + i, 100000);
  for (int i = 0; i < 4; ++i) model.ObserveDecodeStep(kDecode, 2, 10000);
  EXPECT_THAT(model.DecodeFit(kDecode),
              Optional(AllOf(Field(&DecodeStepFit::intercept_ms, DoubleNear(10, kTol)),
                             Field(&DecodeStepFit::slope_ms, 0.0),
                             Field(&DecodeStepFit::num_observations, 4))));
}

TEST(LatencyModelTest, EstimatesExpireAndStartAfreshAfterMaxAge) {
  absl::Time now = absl::FromUnixSeconds(1000);
  LatencyModel model(
      {.prefill_alpha = 0.5, .max_age = absl::Seconds(10), .now = [&now] { return now; }});
  model.ObservePrefill(kPrefill, 100, Us(1), Us(1.1));  // a slow first prefill: 1000 tokens/s
  model.ObserveDecodeStep(kDecode, 1, 50000);
  now += absl::Seconds(10);
  EXPECT_THAT(model.PrefillTokensPerSecond(kPrefill), Optional(DoubleNear(1000, 1e-6)));
  EXPECT_THAT(model.PredictDecodeStepMs(kDecode, 1), Optional(DoubleNear(50, kTol)));
  EXPECT_EQ(model.Estimates().size(), 2u);

  now += absl::Milliseconds(1);
  EXPECT_EQ(model.PrefillTokensPerSecond(kPrefill), std::nullopt);
  EXPECT_EQ(model.PredictDecodeStepMs(kDecode, 1), std::nullopt);
  EXPECT_TRUE(model.Estimates().empty());

  // The next observations are the whole estimate: nothing of the expired ones is blended in.
  model.ObservePrefill(kPrefill, 400, Us(100), Us(100.1));
  model.ObserveDecodeStep(kDecode, 1, 5000);
  EXPECT_THAT(model.PrefillTokensPerSecond(kPrefill), Optional(DoubleNear(4000, 1e-6)));
  EXPECT_THAT(model.DecodeFit(kDecode),
              Optional(AllOf(Field(&DecodeStepFit::intercept_ms, DoubleNear(5, kTol)),
                             Field(&DecodeStepFit::num_observations, 1))));
  EXPECT_THAT(model.Estimates(), ElementsAre(Field(&InstanceEstimate::num_prefill_samples, 0),
                                             Field(&InstanceEstimate::num_prefill_samples, 1)));

  // Observations keep an estimate alive.
  for (int i = 0; i < 5; ++i) {
    now += absl::Seconds(6);
    model.ObservePrefill(kPrefill, 400, Us(200 + i), Us(200.1 + i));
  }
  EXPECT_THAT(model.PrefillTokensPerSecond(kPrefill), Optional(DoubleNear(4000, 1e-6)));
  EXPECT_THAT(model.Estimates(), ElementsAre(Field(&InstanceEstimate::name, kPrefill)));
}

TEST(LatencyModelTest, StepTimeNeverGoesBelowZero) {
  EXPECT_EQ((DecodeStepFit{.intercept_ms = -10, .slope_ms = 2}).StepMs(3), 0.0);
  EXPECT_EQ((DecodeStepFit{.intercept_ms = -10, .slope_ms = 2}).StepMs(8), 6.0);
}

TEST(LatencyModelTest, EstimatesListEveryInstanceByName) {
  LatencyModel model;
  model.ObserveDecodeStep("decode worker 0", 1, 2000);
  model.ObservePrefill("colocated worker 0", 10, Us(1), Us(1.01));
  model.ObserveDecodeStep("colocated worker 0", 1, 3000);
  const auto estimates = model.Estimates();
  ASSERT_EQ(estimates.size(), 2u);
  EXPECT_EQ(estimates[0].name, "colocated worker 0");
  EXPECT_THAT(estimates[0].prefill_tokens_per_s, Optional(DoubleNear(1000, 1e-6)));
  EXPECT_EQ(estimates[0].num_prefill_samples, 1);
  ASSERT_TRUE(estimates[0].decode.has_value());
  EXPECT_NEAR(estimates[0].decode->intercept_ms, 3, kTol);
  EXPECT_EQ(estimates[1].name, "decode worker 0");
  EXPECT_EQ(estimates[1].prefill_tokens_per_s, std::nullopt);
  EXPECT_EQ(estimates[1].num_prefill_samples, 0);
}

}  // namespace
}  // namespace baton::scheduler
