// Perplexity from prompt logprobs (runtime/engine/perplexity.h): the windows cover the text once,
// and the total is the sum of -log p(token | the window's tokens before it) computed independently,
// from each prefix's own next-token logits.
#include "runtime/engine/perplexity.h"

#include <cmath>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "baton/kernels/sampling.h"
#include "tests/testing/engine_requests.h"
#include "tests/testing/safetensors_writer.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Greedy;
using testing::Prompt;

TEST(PerplexityWindowsTest, CutsTheTextIntoDisjointWindowsEachWithThePrefix) {
  const std::vector<int32_t> text = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
  EXPECT_THAT(PerplexityWindows(text, {.window = 4, .prefix = {0}}),
              ElementsAre(ElementsAre(0, 10, 11, 12, 13), ElementsAre(0, 14, 15, 16, 17),
                          ElementsAre(0, 18, 19)));
  EXPECT_THAT(PerplexityWindows(text, {.window = 5}),
              ElementsAre(ElementsAre(10, 11, 12, 13, 14), ElementsAre(15, 16, 17, 18, 19)));
}

class PerplexityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_THAT(testing::WriteTinyModel(dir_.path(), testing::TinyEngineSpec()), IsOk());
  }

  std::unique_ptr<Engine> MakeEngine() {
    auto engine = Engine::Create({.model_dir = dir_.path(), .num_threads = 1, .block_size = 4,
                                  .kv_cache_bytes = 4 << 20, .max_num_seqs = 8,
                                  .max_num_batched_tokens = 64, .max_model_len = 32});
    EXPECT_THAT(engine, IsOk());
    return engine.ok() ? std::move(*engine) : nullptr;
  }

  // -log p(window[i] | window[:i]) summed over i >= 1 and the windows, one request per prefix.
  double ExpectedNll(const std::vector<std::vector<int32_t>>& windows) {
    auto engine = MakeEngine();
    double nll = 0;
    for (const std::vector<int32_t>& window : windows) {
      for (size_t i = 1; i < window.size(); ++i) {
        GenerationParams params = Greedy(1);
        params.return_logits = true;
        EXPECT_THAT(engine->AddRequest({window.begin(), window.begin() + i}, params), IsOk());
        auto outputs = engine->Step();
        EXPECT_THAT(outputs, IsOk());
        if (!outputs.ok() || outputs->size() != 1) return NAN;
        nll -= kernels::TopLogprobs((*outputs)[0].logits, 0, window[i]).back().logprob;
      }
    }
    return nll;
  }

  testing::ScopedTempDir dir_;
};

TEST_F(PerplexityTest, SumsEveryScoredTokenOnce) {
  const std::vector<int32_t> text = Prompt(27, 5);
  const PerplexityOptions options{.window = 8, .prefix = {1}};
  auto engine = MakeEngine();
  absl::StatusOr<PerplexityResult> result = ScorePerplexity(*engine, text, options);
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->num_windows, 4);
  EXPECT_EQ(result->num_scored_tokens, 27) << "with a prefix token every text token is scored";
  const double expected = ExpectedNll(PerplexityWindows(text, options));
  EXPECT_NEAR(result->total_nll, expected, 1e-4 * expected);
  EXPECT_NEAR(result->perplexity(), std::exp(expected / 27), 1e-3);
  EXPECT_FALSE(engine->HasWork());
}

TEST_F(PerplexityTest, WithoutAPrefixEachWindowsFirstTokenGoesUnscored) {
  auto engine = MakeEngine();
  absl::StatusOr<PerplexityResult> result = ScorePerplexity(*engine, Prompt(17, 6), {.window = 8});
  ASSERT_THAT(result, IsOk());
  EXPECT_EQ(result->num_windows, 2) << "the last window holds one token and scores nothing";
  EXPECT_EQ(result->num_scored_tokens, 14);
}

TEST_F(PerplexityTest, RefusesWhatItCannotScore) {
  auto engine = MakeEngine();
  EXPECT_THAT(ScorePerplexity(*engine, {}, {}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ScorePerplexity(*engine, Prompt(5, 1), {.window = 1}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("window")));
  // Longer than the engine's context (32): the engine's refusal, naming the window.
  EXPECT_THAT(ScorePerplexity(*engine, Prompt(40, 1), {.window = 40}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("window 0 (40 tokens)")));
  ASSERT_THAT(engine->AddRequest(Prompt(5, 1), Greedy(2)), IsOk());
  EXPECT_THAT(ScorePerplexity(*engine, Prompt(5, 1), {.window = 4}),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace baton::runtime
