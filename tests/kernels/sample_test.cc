#include "baton/kernels/sample.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "baton/kernels/philox.h"
#include "baton/kernels/sampling.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/reference/random_tensor.h"
#include "kernels/reference/reference_ops.h"
#include "kernels/simt/emulated_kernels.h"
#include "tests/testing/device_runners.h"
#include "tests/testing/kernel_backend.h"
#include "tests/testing/status_matchers.h"

namespace baton::kernels {
namespace {

using absl_testing::IsOk;
using absl_testing::StatusIs;
using reference::TestRng;
using ::testing::HasSubstr;

// One batch of rows with their options, and room for the outputs.
struct Batch {
  int vocab_size = 0;
  std::vector<float> logits;
  std::vector<float> temperature;
  std::vector<int32_t> top_k;
  std::vector<float> top_p;
  std::vector<float> min_p;
  std::vector<uint64_t> seed;
  std::vector<uint64_t> draw_idx;
  std::vector<int32_t> token_ids;
  std::vector<float> logprobs;

  int num_seqs() const { return static_cast<int>(temperature.size()); }

  void Add(const std::vector<float>& row, const SamplingOptions& o, uint64_t s, uint64_t d) {
    logits.insert(logits.end(), row.begin(), row.end());
    temperature.push_back(o.temperature);
    top_k.push_back(o.top_k);
    top_p.push_back(o.top_p);
    min_p.push_back(o.min_p);
    seed.push_back(s);
    draw_idx.push_back(d);
    token_ids.push_back(-2);
    logprobs.push_back(NAN);
  }

  SampleParams Params(bool with_logprobs = true) {
    return {.logits = logits.data(),
            .temperature = temperature.data(),
            .top_k = top_k.data(),
            .top_p = top_p.data(),
            .min_p = min_p.data(),
            .seed = seed.data(),
            .draw_idx = draw_idx.data(),
            .token_ids = token_ids.data(),
            .logprobs = with_logprobs ? logprobs.data() : nullptr,
            .num_seqs = num_seqs(),
            .vocab_size = vocab_size};
  }

  std::string Describe(int s) const {
    return "row " + std::to_string(s) + " (vocab " + std::to_string(vocab_size) + ", temperature " +
           std::to_string(temperature[s]) + ", top_k " + std::to_string(top_k[s]) + ", top_p " +
           std::to_string(top_p[s]) + ", min_p " + std::to_string(min_p[s]) + ", seed " + std::to_string(seed[s]) + ", draw " +
           std::to_string(draw_idx[s]) + ")";
  }
};

// Logits with the features that stress the tie and boundary rules: values on a coarse grid (many
// exact ties), the max repeated, -0/+0, -inf entries, and sometimes rows of +inf or all -inf.
std::vector<float> RandomRow(int n, TestRng& rng) {
  std::vector<float> row(n);
  const int kind = static_cast<int>(rng.UniformInt(0, 9));
  const float range = kind < 3 ? 2.0f : kind < 6 ? 8.0f : 30.0f;
  const bool grid = rng.UniformInt(0, 1) == 1;
  for (float& x : row) {
    x = rng.Uniform(-range, range);
    if (grid) x = std::round(x * 2.0f) / 2.0f;  // ties; includes -0 and +0
  }
  if (n > 4 && rng.UniformInt(0, 3) == 0) row[rng.UniformInt(0, n - 1)] = -INFINITY;
  if (n > 4 && rng.UniformInt(0, 3) == 0) {
    const float top = *std::max_element(row.begin(), row.end());
    row[rng.UniformInt(0, n - 1)] = top;  // the max twice
  }
  if (kind == 9 && n > 2) {
    row[rng.UniformInt(0, n - 1)] = INFINITY;
    row[rng.UniformInt(0, n - 1)] = INFINITY;
  }
  if (kind == 8 && rng.UniformInt(0, 3) == 0) std::fill(row.begin(), row.end(), -INFINITY);
  return row;
}

SamplingOptions RandomOptions(int n, TestRng& rng) {
  constexpr float kTemperatures[] = {0.0f, 0.05f, 0.3f, 0.7f, 1.0f, 1.5f, 5.0f};
  constexpr float kTopP[] = {1.0f, 1.0f, 0.999f, 0.95f, 0.9f, 0.5f, 0.1f, 1e-6f};
  constexpr float kMinP[] = {0.0f, 0.0f, 0.0f, 1e-6f, 0.05f, 0.3f, 0.9f, 1.0f};
  const int top_k_choices[] = {0, 0, 1, 2, 5, 50, n - 1, n, n + 3};
  return {.temperature = kTemperatures[rng.UniformInt(0, 6)],
          .top_k = std::max(0, top_k_choices[rng.UniformInt(0, 8)]),
          .top_p = kTopP[rng.UniformInt(0, 7)],
          .min_p = kMinP[rng.UniformInt(0, 7)]};
}

// A batch of `num_seqs` random rows and options of one vocabulary size.
Batch RandomBatch(int vocab_size, int num_seqs, uint64_t seed) {
  TestRng rng(seed);
  Batch b;
  b.vocab_size = vocab_size;
  for (int s = 0; s < num_seqs; ++s) {
    const uint64_t draw = rng.UniformInt(0, 3) == 0 ? rng.engine()() : rng.UniformInt(0, 100);
    b.Add(RandomRow(vocab_size, rng), RandomOptions(vocab_size, rng), rng.engine()(), draw);
  }
  return b;
}

// The specification of sample.h written as plainly as possible: sort, cut, walk.
int32_t SpecToken(const float* logits, int n, const SamplingOptions& o, uint64_t seed,
                  uint64_t draw_idx) {
  const int32_t argmax = static_cast<int32_t>(std::max_element(logits, logits + n) - logits);
  const float max_logit = logits[argmax];
  if (o.temperature == 0 || max_logit == -INFINITY) return argmax;
  std::vector<uint64_t> weight(n);
  for (int i = 0; i < n; ++i) {
    weight[i] = SamplingWeight(logits[i], max_logit, 1.0f / o.temperature);
  }
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  size_t keep = o.top_k > 0 && o.top_k < n ? static_cast<size_t>(o.top_k) : n;
  if (o.top_p < 1) {
    uint64_t total = 0;
    for (size_t r = 0; r < keep; ++r) total += weight[order[r]];
    const uint64_t target = TopPTarget(o.top_p, total);
    uint64_t cum = 0;
    for (size_t r = 0; r < keep; ++r) {
      cum += weight[order[r]];
      if (cum >= target) {
        keep = r + 1;
        break;
      }
    }
  }
  std::vector<int32_t> kept;
  for (size_t r = 0; r < keep; ++r) {
    // min-p: a probability at least min_p times the max's, in the weights' fixed point.
    if (static_cast<double>(weight[order[r]]) >= static_cast<double>(o.min_p) * 0x1p40) {
      kept.push_back(order[r]);
    }
  }
  std::sort(kept.begin(), kept.end());
  uint64_t total = 0;
  for (int32_t i : kept) total += weight[i];
  const uint64_t target = DrawTarget(SamplerBits24(seed, draw_idx), total);
  uint64_t cum = 0;
  for (int32_t i : kept) {
    cum += weight[i];
    if (cum > target) return i;
  }
  ADD_FAILURE() << "the draw fell past the kept total";
  return -1;
}

// ---- The shared arithmetic ----

TEST(SampleMathTest, ExpIsAccurateAndMonotone) {
  float previous = 0;
  for (int i = -28 * 4096; i <= 0; ++i) {
    const float x = static_cast<float>(i) / 4096.0f;
    const float e = SamplingExp(x);
    ASSERT_NEAR(e, std::exp(double{x}), 2e-7 * std::exp(double{x})) << "x " << x;
    ASSERT_GE(e, previous) << "x " << x;
    previous = e;
  }
  EXPECT_EQ(SamplingExp(0.0f), 1.0f);
  EXPECT_EQ(SamplingExp(-28.5f), 0.0f);
  EXPECT_EQ(SamplingExp(-INFINITY), 0.0f);
}

TEST(SampleMathTest, WeightsAreFixedPointProbabilitiesRelativeToTheMax) {
  EXPECT_EQ(SamplingWeight(3.0f, 3.0f, 1.0f), uint64_t{1} << 40);
  EXPECT_EQ(SamplingWeight(INFINITY, INFINITY, 1.0f), uint64_t{1} << 40);
  EXPECT_EQ(SamplingWeight(1.0f, INFINITY, 1.0f), 0u);
  EXPECT_EQ(SamplingWeight(-INFINITY, 0.0f, 1.0f), 0u);
  EXPECT_EQ(SamplingWeight(-100.0f, 0.0f, 1.0f), 0u);
  EXPECT_EQ(SamplingWeight(-1.0f, 0.0f, INFINITY), 0u);  // a subnormal temperature
  const double w = static_cast<double>(SamplingWeight(1.0f, 2.0f, 0.5f)) * 0x1.0p-40;
  EXPECT_NEAR(w, std::exp(-0.5), 1e-7);
}

TEST(SampleMathTest, KeysOrderLikeFloatsWithSignedZerosEqual) {
  const float sorted[] = {-INFINITY, -3e38f, -1.0f, -1e-40f, 0.0f, 1e-40f, 1.0f, 3e38f, INFINITY};
  for (size_t i = 1; i < std::size(sorted); ++i) {
    EXPECT_LT(SampleKey(sorted[i - 1]), SampleKey(sorted[i])) << sorted[i];
  }
  EXPECT_EQ(SampleKey(-0.0f), SampleKey(0.0f));
}

TEST(SampleMathTest, DrawTargetIsTheExactFloorOfTheScaledTotal) {
  TestRng rng(5);
  for (int i = 0; i < 10000; ++i) {
    const uint64_t total = 1 + (rng.engine()() >> rng.UniformInt(6, 63));
    const uint32_t u24 = static_cast<uint32_t>(rng.engine()() >> 40);
    const unsigned __int128 exact = (static_cast<unsigned __int128>(total) * u24) >> 24;
    ASSERT_EQ(DrawTarget(u24, total), static_cast<uint64_t>(exact)) << total << " " << u24;
    ASSERT_LT(DrawTarget(u24, total), total);
  }
  EXPECT_EQ(DrawTarget(0xFFFFFF, uint64_t{1} << 58), (uint64_t{1} << 58) - (uint64_t{1} << 34));
}

TEST(SampleMathTest, TopPTargetIsCeilClampedToTheTotal) {
  EXPECT_EQ(TopPTarget(0.5f, 10), 5u);
  EXPECT_EQ(TopPTarget(0.51f, 10), 6u);
  EXPECT_EQ(TopPTarget(1e-30f, 10), 1u);
  EXPECT_EQ(TopPTarget(1.0f, 10), 10u);
}

// ---- (a) the CPU twin against the plain specification, exactly ----

TEST(SampleCpuTest, MatchesTheSpecificationExactly) {
  int num_rows = 0;
  for (int vocab_size : {1, 2, 3, 31, 32, 33, 100, 257, 1000, 4099}) {
    Batch b = RandomBatch(vocab_size, 300, 1000 + vocab_size);
    ASSERT_THAT(SampleCpu(b.Params()), IsOk());
    for (int s = 0; s < b.num_seqs(); ++s) {
      const SamplingOptions o{.temperature = b.temperature[s], .top_k = b.top_k[s],
                              .top_p = b.top_p[s], .min_p = b.min_p[s]};
      ASSERT_EQ(b.token_ids[s], SpecToken(b.logits.data() + int64_t{s} * vocab_size, vocab_size, o,
                                          b.seed[s], b.draw_idx[s]))
          << b.Describe(s);
      ++num_rows;
    }
  }
  EXPECT_EQ(num_rows, 3000);
}

// Large vocabularies take SampleToken's candidate narrowing; the kept set must not change.
TEST(SampleCpuTest, NarrowedCandidatesGiveTheSpecifiedTokenOnLargeVocabularies) {
  TestRng rng(77);
  for (int trial = 0; trial < 60; ++trial) {
    const int n = 32000 + static_cast<int>(rng.UniformInt(0, 1000));
    const std::vector<float> row = reference::RandomVector(n, 500 + trial, -1 - trial % 7, 6);
    const SamplingOptions o{.temperature = trial % 3 == 0 ? 0.5f : 1.0f,
                            .top_k = trial % 4 == 0 ? 40 : 0,
                            .top_p = trial % 2 == 0 ? 0.9f : (trial % 3 == 0 ? 1.0f : 0.5f),
                            .min_p = trial % 5 == 0 ? 0.1f : 0.0f};
    const uint64_t seed = rng.engine()();
    SamplerRng sampler(seed, trial);
    ASSERT_EQ(*SampleToken(row, o, sampler), SpecToken(row.data(), n, o, seed, trial))
        << "trial " << trial;
  }
}

TEST(SampleCpuTest, LogprobsAreTheLogSoftmaxOfTheToken) {
  TestRng rng(3);
  Batch b;
  b.vocab_size = 500;
  for (int s = 0; s < 40; ++s) {
    b.Add(reference::RandomVector(500, 40 + s, -5, 5), RandomOptions(500, rng), s, s);
  }
  ASSERT_THAT(SampleCpu(b.Params()), IsOk());
  for (int s = 0; s < b.num_seqs(); ++s) {
    const std::vector<double> expected =
        reference::LogSoftmax(std::span<const float>(b.logits.data() + s * 500, 500));
    EXPECT_NEAR(b.logprobs[s], expected[b.token_ids[s]], 1e-5) << b.Describe(s);
  }
}

TEST(SampleCpuTest, RejectsBadParamsAndOptions) {
  Batch b = RandomBatch(10, 2, 1);
  SampleParams p = b.Params();
  p.vocab_size = 0;
  EXPECT_THAT(SampleCpu(p), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("vocab_size")));
  p = b.Params();
  p.seed = nullptr;
  EXPECT_THAT(SampleCpu(p), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("seed")));
  b.top_p[1] = 0;
  EXPECT_THAT(SampleCpu(b.Params()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sequence 1: SampleToken: top_p")));
  p = b.Params();
  p.num_seqs = 0;
  p.logits = nullptr;
  EXPECT_THAT(SampleCpu(p), IsOk());
}

// (c) a NaN row gets -1 and leaves the other rows alone, on the twin as from the kernel.
TEST(SampleCpuTest, MarksNaNRows) {
  Batch b = RandomBatch(10, 3, 1);
  b.temperature[1] = 0;  // even greedy
  Batch clean = b;
  ASSERT_THAT(SampleCpu(clean.Params()), IsOk());
  b.logits[13] = NAN;
  ASSERT_THAT(SampleCpu(b.Params()), IsOk());
  EXPECT_EQ(b.token_ids[0], clean.token_ids[0]);
  EXPECT_EQ(b.token_ids[1], -1);
  EXPECT_TRUE(std::isnan(b.logprobs[1]));
  EXPECT_EQ(b.token_ids[2], clean.token_ids[2]);
}

// ---- (b) the CUDA kernel (emulated, or on a GPU) against the CPU twin: the same tokens ----

using Backend = testing::KernelBackend<SampleParams>;
class SampleKernelTest : public ::testing::TestWithParam<std::tuple<Backend, int>> {};

TEST_P(SampleKernelTest, GivesTheCpuTokensForTheSameSeedAndDraw) {
  const auto [backend, vocab_size] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  const int num_seqs = vocab_size >= 30000 ? 24 : vocab_size >= 1000 ? 60 : 150;
  Batch expected = RandomBatch(vocab_size, num_seqs, 7000 + vocab_size);
  ASSERT_THAT(SampleCpu(expected.Params()), IsOk());
  Batch b = expected;
  std::fill(b.token_ids.begin(), b.token_ids.end(), -2);
  ASSERT_THAT(backend.run(b.Params()), IsOk());
  for (int s = 0; s < num_seqs; ++s) {
    ASSERT_EQ(b.token_ids[s], expected.token_ids[s]) << b.Describe(s);
    const float want = expected.logprobs[s];
    if (std::isfinite(want)) {
      EXPECT_NEAR(b.logprobs[s], want, 1e-4f * std::max(1.0f, std::abs(want))) << b.Describe(s);
    }
  }
}

// (c) a NaN row gets -1, as from the twin, and leaves the other rows alone; the logprobs output
// is optional.
TEST_P(SampleKernelTest, MarksNaNRowsAndSkipsNullLogprobs) {
  const auto [backend, vocab_size] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  Batch b = RandomBatch(vocab_size, 4, 99);
  b.temperature[0] = 0;
  b.temperature[1] = 0.8f;
  b.temperature[2] = 0;
  b.logits[int64_t{vocab_size} + vocab_size / 2] = NAN;
  b.logits[int64_t{2} * vocab_size + vocab_size - 1] = NAN;
  Batch expected = b;
  ASSERT_THAT(SampleCpu(expected.Params(false)), IsOk());
  ASSERT_THAT(backend.run(b.Params(false)), IsOk());
  EXPECT_EQ(b.token_ids, expected.token_ids);
  EXPECT_EQ(b.token_ids[1], -1);
  EXPECT_EQ(b.token_ids[2], -1);
  EXPECT_TRUE(std::isnan(b.logprobs[0]));  // untouched
}

// (c) a row's token depends on that row only: batched equals one row at a time.
TEST_P(SampleKernelTest, BatchedEqualsPerRow) {
  const auto [backend, vocab_size] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  Batch b = RandomBatch(vocab_size, 6, 123);
  ASSERT_THAT(backend.run(b.Params()), IsOk());
  for (int s = 0; s < b.num_seqs(); ++s) {
    Batch one;
    one.vocab_size = vocab_size;
    one.Add(std::vector<float>(b.logits.begin() + int64_t{s} * vocab_size,
                               b.logits.begin() + int64_t{s + 1} * vocab_size),
            {.temperature = b.temperature[s], .top_k = b.top_k[s], .top_p = b.top_p[s],
             .min_p = b.min_p[s]},
            b.seed[s],
            b.draw_idx[s]);
    ASSERT_THAT(backend.run(one.Params()), IsOk());
    EXPECT_EQ(one.token_ids[0], b.token_ids[s]) << b.Describe(s);
  }
}

std::string KernelTestName(const ::testing::TestParamInfo<std::tuple<Backend, int>>& info) {
  return std::string(std::get<0>(info.param).name) + "_v" + std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    Emulated, SampleKernelTest,
    ::testing::Combine(::testing::Values(Backend{"emulated", &SampleEmulated,
                                                 &testing::AlwaysAvailable}),
                       ::testing::Values(1, 7, 32, 33, 100, 257, 1000, 5003)),
    KernelTestName);
#if BATON_HAS_CUDA
INSTANTIATE_TEST_SUITE_P(
    Cuda, SampleKernelTest,
    ::testing::Combine(::testing::Values(Backend{"cuda", &testing::SampleOnDevice,
                                                 &testing::CudaDeviceAvailable}),
                       ::testing::Values(1, 7, 32, 33, 100, 257, 1000, 5003, 32000, 151936)),
    KernelTestName);
#endif

}  // namespace
}  // namespace baton::kernels
