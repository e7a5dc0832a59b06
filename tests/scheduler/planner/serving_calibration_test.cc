#include "scheduler/planner/serving_calibration.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::scheduler::planner {
namespace {

// prefill = 5 + 0.1 t ms; decode = 2 + 1 * batch ms (no context term, so each step is exact).
const TpCoefficients kTp1{.prefill = {5, 0.1, 0}, .decode = {2, 0, 1}};

// A served timeline with known factors: prefill alone 1.1x, prefill beside a decode 1.4x, decode
// alone 1.2x, decode while a prefill runs 1.5x.
//   A (100 tokens): prefill [0, 16.5 ms] alone, then decodes alone (3 ms x 1.2 per token);
//   B (200 tokens): prefill [200, 235 ms] (25 ms x 1.4) beside A's decode, whose steps meanwhile
//   take 3 ms x 1.5; from 236 ms both decode at batch 2 (4 ms x 1.2).
std::vector<ServedRequest> KnownTimeline() {
  ServedRequest a{.input_len = 100, .prefill_start_s = 0, .prefill_end_s = 0.0165, .decode_start_s = 0.017};
  ServedRequest b{.input_len = 200, .prefill_start_s = 0.2, .prefill_end_s = 0.235, .decode_start_s = 0.236};
  a.token_s = {0.0165, 0.020};
  b.token_s = {0.235};
  double t = 0.020;
  while (t < 0.2) a.token_s.push_back(t += 0.0036);
  while (t < 0.235) a.token_s.push_back(t += 0.0045);
  t = 0.2365;
  for (int i = 0; i < 60; ++i) {
    t += 0.0048;
    a.token_s.push_back(t);
    b.token_s.push_back(t);
  }
  return {a, b};
}

TEST(ServingCalibrationTest, RecoversKnownFactors) {
  absl::StatusOr<ServingCalibration> fit = FitServingSlowdown(KnownTimeline(), kTp1);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->slowdown.prefill_alone, 1.1, 1e-6);
  EXPECT_NEAR(fit->slowdown.prefill_shared, 1.4, 1e-6);
  EXPECT_NEAR(fit->slowdown.decode_alone, 1.2, 1e-6);
  EXPECT_NEAR(fit->slowdown.decode_shared, 1.5, 1e-6);
  EXPECT_EQ(fit->prefill_alone_samples, 1);
  EXPECT_EQ(fit->prefill_shared_samples, 1);
  EXPECT_GT(fit->decode_alone_samples, 100);
  EXPECT_GE(fit->decode_shared_samples, 6);
}

TEST(ServingCalibrationTest, PromptsBatchedTogetherAreNotSamples) {
  std::vector<ServedRequest> requests = KnownTimeline();
  // A third prompt sharing A's prefill window: neither A nor it is a one-prompt step any more.
  requests.push_back({.input_len = 50, .prefill_start_s = 0.001, .prefill_end_s = 0.0165, .token_s = {0.0165}});
  absl::StatusOr<ServingCalibration> fit = FitServingSlowdown(requests, kTp1);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->prefill_alone_samples, 0);
  // No "alone" prefill left: it takes the shared one's factor rather than inventing one.
  EXPECT_NEAR(fit->slowdown.prefill_alone, 1.4, 1e-6);
}

TEST(ServingCalibrationTest, RejectsRecordsThatCannotCalibrate) {
  EXPECT_EQ(FitServingSlowdown({}, kTp1).status().code(), absl::StatusCode::kInvalidArgument);
  // A colocated run: no KV hand-off, so no decode step can be told apart.
  const std::vector<ServedRequest> colocated = {
      {.input_len = 10, .prefill_start_s = 0, .prefill_end_s = 0.006, .token_s = {0.006, 0.009, 0.012}}};
  EXPECT_THAT(std::string(FitServingSlowdown(colocated, kTp1).status().message()),
              ::testing::HasSubstr("no decode step"));
  const std::vector<ServedRequest> backwards = {
      {.input_len = 10, .prefill_start_s = 1, .prefill_end_s = 0.5, .token_s = {0.5}}};
  EXPECT_THAT(std::string(FitServingSlowdown(backwards, kTp1).status().message()),
              ::testing::HasSubstr("out of order"));
}

}  // namespace
}  // namespace baton::scheduler::planner
