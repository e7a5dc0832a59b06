#include "scheduler/planner/serving_calibration.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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

// Step traces (step_trace.h's format): a header, then one line per step.
std::string Header(const char* role, int instance, int tp, int pp) {
  return absl::StrCat(R"({"role": ")", role, R"(", "instance": )", instance, R"(, "tp": )", tp,
                      R"(, "pp": )", pp, R"(, "device": "cpu", "pid": 7})", "\n");
}
std::string Step(double start_s, double end_s, int prompt_tokens, int decode_seqs, bool busy_after = false) {
  const double q = prompt_tokens;
  return absl::StrCat(R"({"start_us": )", start_s * 1e6, R"(, "end_us": )", end_s * 1e6,
                      R"(, "prompt_tokens": )", prompt_tokens, R"(, "prompt_tokens_squared": )", q * q,
                      R"(, "decode_seqs": )", decode_seqs, R"(, "decode_context": 0, "busy_after": )",
                      busy_after ? "true" : "false", "}\n");
}

TEST(StepTraceCalibrationTest, ParsesATrace) {
  absl::StatusOr<InstanceTrace> trace =
      ParseStepTrace(Header("colocated", 1, 2, 1) + Step(0.5, 0.75, 0, 3) + Step(0.25, 0.5, 40, 1));
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->name, "colocated 1");
  EXPECT_EQ(trace->parallelism, (Parallelism{2, 1}));
  ASSERT_EQ(trace->steps.size(), 2u);
  EXPECT_DOUBLE_EQ(trace->steps[0].start_s, 0.25) << "in start order";
  EXPECT_EQ(trace->steps[0].shape.prompt_tokens, 40);
  EXPECT_EQ(trace->steps[0].shape.prompt_tokens_squared, 1600);
  EXPECT_EQ(trace->steps[1].shape.num_decode_seqs, 3);
}

TEST(StepTraceCalibrationTest, RejectsMalformedTraces) {
  auto message = [](const std::string& text) { return std::string(ParseStepTrace(text).status().message()); };
  EXPECT_THAT(message(""), ::testing::HasSubstr("no header"));
  EXPECT_THAT(message(Step(0, 1, 1, 0)), ::testing::HasSubstr("line 1: expected the header"));
  EXPECT_THAT(message(Header("decode", 0, 1, 1) + "{not json\n"), ::testing::HasSubstr("line 2: not a JSON object"));
  EXPECT_THAT(message(Header("decode", 0, 1, 1) + R"({"start_us": 1})" + "\n"),
              ::testing::HasSubstr("line 2: expected a step"));
  EXPECT_THAT(message(Header("decode", 0, 1, 1) + Step(2, 1, 0, 1)), ::testing::HasSubstr("ends before it starts"));
}

// Two colocated instances with known factors (kTp1: prefill 5 + 0.1 t ms, decode 2 + batch ms):
// prefill alone 1.1x, beside a busy instance 1.4x; decode alone 1.2x, beside a busy one 1.5x.
// A pipeline instance's steps are not samples (they overlap in flight) but keep the others busy.
TEST(StepTraceCalibrationTest, RecoversKnownFactorsOfTheSimulatorsClasses) {
  const std::string a = Header("colocated", 0, 1, 1) +
                        Step(0, 0.0165, 100, 0) +         // 15 ms x 1.1, alone
                        Step(0.020, 0.0236, 0, 1) +       // 3 ms x 1.2, alone
                        Step(0.059, 0.0626, 0, 1) +       // alone: B's prefill ended at 0.056
                        Step(0.070, 0.0821, 50, 1) +      // mixed: 10 + 1 ms x 1.1, alone
                        Step(0.150, 0.1545, 0, 1);        // 3 ms x 1.5, beside the pipeline's step
  const std::string b = Header("colocated", 1, 1, 1) +
                        Step(0.021, 0.056, 200, 0) +      // 25 ms x 1.4, while A decodes
                        Step(0.060, 0.0645, 0, 1);        // 3 ms x 1.5, while A decodes
  const std::string pipeline = Header("colocated", 2, 1, 2) + Step(0.1, 0.2, 0, 8);
  std::vector<InstanceTrace> traces;
  for (const std::string& text : {a, b, pipeline}) traces.push_back(ParseStepTrace(text).value());
  LatencyCoefficients coefficients;
  coefficients.by_tp[1] = kTp1;
  absl::StatusOr<ServingCalibration> fit = FitSlowdownFromStepTraces(traces, coefficients);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->slowdown.prefill_alone, 1.1, 1e-6);
  EXPECT_NEAR(fit->slowdown.prefill_shared, 1.4, 1e-6);
  EXPECT_NEAR(fit->slowdown.decode_alone, 1.2, 1e-6);
  EXPECT_NEAR(fit->slowdown.decode_shared, 1.5, 1e-6);
  EXPECT_EQ(fit->prefill_alone_samples, 2);
  EXPECT_EQ(fit->prefill_shared_samples, 1);
  EXPECT_EQ(fit->decode_alone_samples, 2);
  EXPECT_EQ(fit->decode_shared_samples, 2);

  coefficients.by_tp.clear();
  coefficients.by_tp[2] = kTp1;
  EXPECT_THAT(std::string(FitSlowdownFromStepTraces(traces, coefficients).status().message()),
              ::testing::HasSubstr("colocated 0: the coefficients have no tp 1"));
  coefficients.by_tp[1] = kTp1;
  traces.erase(traces.begin(), traces.begin() + 2);  // the pipeline instance alone
  EXPECT_THAT(std::string(FitSlowdownFromStepTraces(traces, coefficients).status().message()),
              ::testing::HasSubstr("no step with prompt tokens"));
}

// A step after which the engine still had work lasts until the next one starts: the serving loop's
// time between steps is the step's; after an idle gap it ends where it ended.
TEST(StepTraceCalibrationTest, ABusyEnginesStepRunsToTheNextStepsStart) {
  const std::string trace = Header("decode", 0, 1, 1) +
                            Step(0, 0.015, 100, 0) +                 // 15 ms: 1.0x
                            Step(1.0, 1.003, 0, 1, true) +           // 3 ms, then 0.6 ms of loop
                            Step(1.0036, 1.0066, 0, 1, true) +       // the same
                            Step(1.0072, 1.0102, 0, 1, true) +       // the same
                            Step(1.0108, 1.0138, 0, 1, false) +      // then idle: 3 ms
                            Step(2.0, 2.0036, 0, 1, false);          // 3.6 ms
  std::vector<InstanceTrace> traces = {ParseStepTrace(trace).value()};
  EXPECT_TRUE(traces[0].steps[1].busy_after);
  LatencyCoefficients coefficients;
  coefficients.by_tp[1] = kTp1;
  absl::StatusOr<ServingCalibration> fit = FitSlowdownFromStepTraces(traces, coefficients);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->slowdown.prefill_alone, 1.0, 1e-6);
  EXPECT_NEAR(fit->slowdown.decode_alone, 1.2, 1e-6) << "3.6 ms of 3 ms, four of the five steps";
}

}  // namespace
}  // namespace baton::scheduler::planner
