#include "baton/kernels/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/reference/random_tensor.h"
#include "kernels/reference/reference_ops.h"
#include "tests/testing/status_matchers.h"

namespace baton::kernels {
namespace {

using absl_testing::IsOk;
using absl_testing::IsOkAndHolds;
using absl_testing::StatusIs;
using ::testing::HasSubstr;

std::vector<float> Logits(size_t n, uint64_t seed, float range = 4) {
  return kernels::reference::RandomVector(n, seed, -range, range);
}

// Draws `n` tokens and returns the count of each.
std::vector<int> Histogram(const std::vector<float>& logits, const SamplingOptions& options,
                           uint64_t seed, int n) {
  SamplerRng rng(seed);
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) {
    auto token = SampleToken(logits, options, rng);
    EXPECT_THAT(token, IsOk());
    if (token.ok()) ++counts[*token];
  }
  return counts;
}

// Pearson's chi-square statistic of `counts` against `probs` over the categories with p > 0; also
// fails the test if a zero-probability category was drawn.
double ChiSquare(const std::vector<int>& counts, const std::vector<double>& probs, int n,
                 int* degrees_of_freedom) {
  double chi2 = 0;
  int categories = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0";
      continue;
    }
    const double expected = probs[i] * n;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
    ++categories;
  }
  *degrees_of_freedom = categories - 1;
  return chi2;
}

TEST(SampleTokenTest, GreedyTakesTheLowestIndexAmongTies) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 3.0f, 1.0f, 3.0f, 3.0f};
  SamplerRng rng(1);
  EXPECT_THAT(SampleToken(logits, {}, rng), IsOkAndHolds(3));
  const std::vector<float> with_inf = {1.0f, INFINITY, 2.0f, INFINITY};
  EXPECT_THAT(SampleToken(with_inf, {}, rng), IsOkAndHolds(1));
}

TEST(SampleTokenTest, GreedyDoesNotAdvanceTheRng) {
  SamplerRng a(7);
  SamplerRng b(7);
  const std::vector<float> logits = Logits(50, 2);
  ASSERT_THAT(SampleToken(logits, {}, a), IsOk());
  EXPECT_EQ(a.NextUniform(), b.NextUniform());
}

TEST(SampleTokenTest, SameSeedGivesTheSameTokens) {
  const std::vector<float> logits = Logits(1000, 3);
  const SamplingOptions options{.temperature = 1.0f, .top_k = 50, .top_p = 0.9f};
  SamplerRng a(42);
  SamplerRng b(42);
  SamplerRng c(43);
  int num_differences = 0;
  for (int i = 0; i < 200; ++i) {
    const int32_t ta = *SampleToken(logits, options, a);
    ASSERT_EQ(ta, *SampleToken(logits, options, b)) << "draw " << i;
    if (ta != *SampleToken(logits, options, c)) ++num_differences;
  }
  EXPECT_GT(num_differences, 0);
}

TEST(SampleTokenTest, TopKNeverLeavesTheKMostLikely) {
  const std::vector<float> logits = Logits(500, 4);
  std::vector<int> order(500);
  for (int i = 0; i < 500; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  const std::set<int> allowed(order.begin(), order.begin() + 5);
  SamplerRng rng(5);
  for (int i = 0; i < 2000; ++i) {
    const int32_t token = *SampleToken(logits, {.temperature = 2.0f, .top_k = 5}, rng);
    ASSERT_TRUE(allowed.contains(token)) << "token " << token;
  }
}

TEST(SampleTokenTest, TopPNeverLeavesTheNucleus) {
  const std::vector<float> logits = Logits(2000, 6, 8);
  for (float top_p : {0.1f, 0.5f, 0.95f}) {
    const SamplingOptions options{.temperature = 0.8f, .top_p = top_p};
    const std::vector<double> probs = reference::SamplingDistribution(logits, options);
    SamplerRng rng(8);
    for (int i = 0; i < 1000; ++i) {
      const int32_t token = *SampleToken(logits, options, rng);
      ASSERT_GT(probs[token], 0) << "top_p " << top_p << " token " << token;
    }
  }
}

// The empirical distribution matches the specified one: chi-square below the 0.999 quantile
// (deterministic for the fixed seeds; a real mismatch gives statistics in the thousands).
TEST(SampleTokenTest, FrequenciesMatchTheDistribution) {
  const std::vector<float> logits = Logits(12, 9, 2);
  const SamplingOptions cases[] = {
      {.temperature = 1.0f},
      {.temperature = 0.5f},
      {.temperature = 1.5f, .top_k = 4},
      {.temperature = 1.0f, .top_p = 0.7f},
      {.temperature = 0.9f, .top_k = 6, .top_p = 0.8f},
  };
  // 0.999 quantiles of chi-square with 1..11 degrees of freedom.
  const double kCritical[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46,
                              24.32, 26.12, 27.88, 29.59, 31.26};
  constexpr int kDraws = 40000;
  uint64_t seed = 100;
  for (const SamplingOptions& options : cases) {
    const std::vector<double> probs = reference::SamplingDistribution(logits, options);
    const std::vector<int> counts = Histogram(logits, options, seed++, kDraws);
    int dof = 0;
    const double chi2 = ChiSquare(counts, probs, kDraws, &dof);
    ASSERT_GE(dof, 1);
    EXPECT_LT(chi2, kCritical[dof]) << "temperature " << options.temperature << " top_k "
                                    << options.top_k << " top_p " << options.top_p;
  }
}

TEST(SampleTokenTest, LargeVocabularyTopPAgreesWithTheReferenceSet) {
  // More than the 256-token first pass of top-p: the widened search must find the same set.
  const std::vector<float> logits = Logits(32000, 10, 1);
  const SamplingOptions options{.temperature = 1.0f, .top_p = 0.5f};
  const std::vector<double> probs = reference::SamplingDistribution(logits, options);
  SamplerRng rng(11);
  std::set<int32_t> seen;
  for (int i = 0; i < 400; ++i) {
    const int32_t token = *SampleToken(logits, options, rng);
    ASSERT_GT(probs[token], 0);
    seen.insert(token);
  }
  EXPECT_GT(seen.size(), 256u);
}

TEST(SampleTokenTest, InfiniteLogitsShareAllTheMass) {
  const std::vector<float> logits = {1.0f, INFINITY, 2.0f, INFINITY, -INFINITY};
  const std::vector<int> counts = Histogram(logits, {.temperature = 1.0f, .top_p = 0.9f}, 3, 400);
  EXPECT_EQ(counts[0] + counts[2] + counts[4], 0);
  EXPECT_GT(counts[1], 100);
  EXPECT_GT(counts[3], 100);
  const std::vector<float> all_minus_inf(4, -INFINITY);
  SamplerRng rng(1);
  EXPECT_THAT(SampleToken(all_minus_inf, {.temperature = 1.0f}, rng), IsOkAndHolds(0));
}

TEST(SampleTokenTest, RejectsBadInputs) {
  SamplerRng rng(1);
  const std::vector<float> logits = {1, 2, 3};
  EXPECT_THAT(SampleToken({}, {}, rng), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty")));
  EXPECT_THAT(SampleToken(logits, {.temperature = -1}, rng),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("temperature")));
  EXPECT_THAT(SampleToken(logits, {.top_k = -1}, rng),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("top_k")));
  EXPECT_THAT(SampleToken(logits, {.top_p = 0}, rng),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("top_p")));
  const std::vector<float> with_nan = {1, NAN, 3};
  EXPECT_THAT(SampleToken(with_nan, {.temperature = 1}, rng),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("logit 1 is NaN")));
}

TEST(TopLogprobsTest, MatchesLogSoftmaxInDescendingOrder) {
  std::vector<float> logits = Logits(1000, 12);
  logits[17] = logits[500] = 10.0f;  // a tie at the top: lower index first
  const std::vector<double> expected = reference::LogSoftmax(logits);
  const std::vector<TokenLogprob> top = TopLogprobs(logits, 20);
  ASSERT_EQ(top.size(), 20u);
  EXPECT_EQ(top[0].token_id, 17);
  EXPECT_EQ(top[1].token_id, 500);
  for (size_t i = 0; i < top.size(); ++i) {
    EXPECT_NEAR(top[i].logprob, expected[top[i].token_id], 1e-5);
    if (i > 0) {
      EXPECT_GE(top[i - 1].logprob, top[i].logprob);
    }
  }
  // Every token left out is no more likely than the last one kept.
  std::set<int32_t> kept;
  for (const TokenLogprob& t : top) kept.insert(t.token_id);
  for (int i = 0; i < 1000; ++i) {
    if (!kept.contains(i)) {
      EXPECT_LE(expected[i], top.back().logprob + 1e-6);
    }
  }
}

TEST(TopLogprobsTest, TheSampledTokenFollowsWhenItIsNotAmongTheTopK) {
  const std::vector<float> logits = {0.5f, 3.0f, -1.0f, 2.0f, 0.0f};
  const std::vector<TokenLogprob> top = TopLogprobs(logits, 2, /*sampled=*/2);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].token_id, 1);
  EXPECT_EQ(top[1].token_id, 3);
  EXPECT_EQ(top[2].token_id, 2);
  // Ranks: the top k in order, then the sampled token by the logits above its own (all four).
  EXPECT_EQ(top[0].rank, 1);
  EXPECT_EQ(top[1].rank, 2);
  EXPECT_EQ(top[2].rank, 5);
  double sum = 0;
  for (float x : logits) sum += std::exp(double{x});
  EXPECT_NEAR(top[2].logprob, -1.0 - std::log(sum), 1e-6);
  // Among them already, or out of range: nothing added.
  EXPECT_EQ(TopLogprobs(logits, 2, /*sampled=*/3).size(), 2u);
  EXPECT_EQ(TopLogprobs(logits, 2, /*sampled=*/99).size(), 2u);
  // k = 0: the sampled token's alone (vLLM's logprobs=0).
  const std::vector<TokenLogprob> alone = TopLogprobs(logits, 0, /*sampled=*/4);
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_EQ(alone[0].token_id, 4);
  EXPECT_EQ(alone[0].rank, 4);  // below 3.0, 2.0 and 0.5
  EXPECT_NEAR(alone[0].logprob, 0.0 - std::log(sum), 1e-6);
  EXPECT_TRUE(TopLogprobs(logits, 0).empty());
}

TEST(TopLogprobsTest, AllTokensSumToOneAndKIsClamped) {
  const std::vector<float> logits = Logits(64, 13);
  const std::vector<TokenLogprob> all = TopLogprobs(logits, 1000);
  ASSERT_EQ(all.size(), 64u);
  double total = 0;
  for (const TokenLogprob& t : all) total += std::exp(double{t.logprob});
  EXPECT_NEAR(total, 1.0, 1e-5);
  EXPECT_TRUE(TopLogprobs(logits, 0).empty());
}

}  // namespace
}  // namespace baton::kernels
