// The engine profiler on a small checkpoint written by the test (as the engine tests do), with a
// grid small enough to run in a few seconds: it fits non-negative coefficients that predict what it
// measured, and reports bad input as a status.
#include "scheduler/planner/engine_profiler.h"

#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/safetensors_writer.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace baton::scheduler::planner {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class EngineProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // TinyEngineSpec widened so a step takes ~0.2-5 ms, well above the clock's and the scheduler's
    // jitter, while the whole profile stays a few seconds.
    testing::TinyModelSpec spec = testing::TinyEngineSpec();
    spec.hidden_size = 256;
    spec.intermediate_size = 512;
    spec.vocab_size = 1024;
    ASSERT_THAT(testing::WriteTinyModel(dir_.path(), spec), IsOk());
  }

  ProfileOptions SmallGrid() const {
    ProfileOptions options;
    options.model_dir = dir_.path();
    options.prefill_prompt_lens = {16, 48, 96};
    options.prefill_batch_sizes = {1, 2};
    options.decode_batch_sizes = {1, 4, 8};
    options.decode_context_lens = {16, 64, 160};
    options.repeats = 5;
    return options;
  }

  testing::ScopedTempDir dir_;
};

TEST_F(EngineProfilerTest, FitsNonNegativeCoefficientsThatPredictTheMeasuredSteps) {
  ProfileOptions options = SmallGrid();
  std::vector<std::string> lines;
  options.progress = [&lines](std::string_view line) { lines.emplace_back(line); };
  const absl::StatusOr<ProfileResult> result = ProfileEngine(options);
  ASSERT_THAT(result, IsOk());

  const LatencyCoefficients& c = result->coefficients;
  EXPECT_EQ(c.device, "cpu");
  EXPECT_EQ(c.model, dir_.path().filename().string());
  EXPECT_THAT(c.source,
              StartsWith("baton plan profile: " + c.model + ", f32, 1 thread per rank, "));
  ASSERT_EQ(c.by_tp.size(), 1u);
  const TpCoefficients* tp1 = c.ForTp(1);
  ASSERT_NE(tp1, nullptr);
  for (double v : {tp1->prefill.a_ms, tp1->prefill.b_ms, tp1->prefill.c_ms, tp1->decode.a_ms,
                   tp1->decode.b_ms, tp1->decode.c_ms}) {
    EXPECT_GE(v, 0.0);
  }
  EXPECT_FALSE(tp1->decode_large.has_value());

  ASSERT_EQ(result->per_tp.size(), 1u);
  const TpProfile& profile = result->per_tp[0];
  EXPECT_EQ(profile.tp, 1);
  ASSERT_EQ(profile.prefill_samples.size(), 6u);
  ASSERT_EQ(profile.decode_samples.size(), 9u);
  // The largest point of each grid: Σ tokens = 2 x 96, Σ context = 8 x (160 + 1) (the timed step
  // is the batch's second).
  const PrefillSample& prefill = profile.prefill_samples.back();
  EXPECT_EQ(prefill.sum_tokens, 192);
  EXPECT_EQ(prefill.sum_tokens_squared, 2 * 96 * 96);
  const DecodeSample& decode = profile.decode_samples.back();
  EXPECT_EQ(decode.batch_size, 8);
  EXPECT_EQ(decode.sum_context, 8 * 161);
  // The fit predicts what was measured, to within timing noise: on a shared machine a burst of
  // load can still slow a point's median, so two thirds of the points must be within 50%.
  int num_prefill_close = 0;
  for (const PrefillSample& s : profile.prefill_samples) {
    num_prefill_close +=
        std::abs(tp1->PrefillMs(s.sum_tokens, s.sum_tokens_squared) - s.ms) <= 0.5 * s.ms;
  }
  EXPECT_GE(num_prefill_close, 4);
  int num_decode_close = 0;
  for (const DecodeSample& s : profile.decode_samples) {
    num_decode_close += std::abs(tp1->DecodeMs(s.batch_size, s.sum_context) - s.ms) <= 0.5 * s.ms;
  }
  EXPECT_GE(num_decode_close, 6);
  EXPECT_EQ(profile.prefill_relative_rms_error,
            RelativeRmsError(tp1->prefill, profile.prefill_samples));
  EXPECT_EQ(profile.decode_relative_rms_error,
            RelativeRmsError(tp1->decode, profile.decode_samples));

  // A loading line, then per phase a line per pass and one per grid point.
  EXPECT_EQ(lines.size(), 1u + (5u + 6u) + (5u + 9u));
  EXPECT_THAT(lines.back(), HasSubstr("tp 1: decode 8 x 160 context: "));
}

TEST_F(EngineProfilerTest, AMissingModelIsAStatus) {
  ProfileOptions options = SmallGrid();
  options.model_dir = dir_.path() / "no-such-model";
  EXPECT_THAT(ProfileEngine(options), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(EngineProfilerTest, BadOptionsAreInvalidArgument) {
  ProfileOptions options = SmallGrid();
  options.tps = {};
  EXPECT_THAT(ProfileEngine(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tps")));
  options = SmallGrid();
  options.decode_batch_sizes = {1, 0};
  EXPECT_THAT(ProfileEngine(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("decode batch sizes")));
  options = SmallGrid();
  options.repeats = 0;
  EXPECT_THAT(ProfileEngine(options), StatusIs(absl::StatusCode::kInvalidArgument));
  // The test model has 256 positions.
  options = SmallGrid();
  options.decode_context_lens = {300, 400};
  EXPECT_THAT(ProfileEngine(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("no decode context length fits the model's 256 positions")));
}

TEST_F(EngineProfilerTest, LengthsBeyondTheModelAreLeftOutAndSaidSo) {
  ProfileOptions options = SmallGrid();
  options.prefill_prompt_lens = {16, 48, 96, 256};  // 256 prompt tokens + 1 sampled > 256
  std::vector<std::string> lines;
  options.progress = [&lines](std::string_view line) { lines.emplace_back(line); };
  const absl::StatusOr<ProfileResult> result = ProfileEngine(options);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->per_tp[0].prefill_samples.size(), 6u);
  ASSERT_FALSE(lines.empty());
  EXPECT_THAT(lines[0], HasSubstr("left out prefill prompt length 256"));
}

TEST_F(EngineProfilerTest, ATpThatDoesNotDivideTheHeadsIsTheEnginesError) {
  ProfileOptions options = SmallGrid();
  options.tps = {3};  // 4 query heads, 2 KV heads
  EXPECT_THAT(ProfileEngine(options), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace baton::scheduler::planner
