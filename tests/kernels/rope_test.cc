#include "baton/kernels/rope.h"

#include <cmath>
#include <numbers>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/reference/random_tensor.h"
#include "kernels/reference/reference_ops.h"
#include "kernels/simt/emulated_kernels.h"
#include "tests/testing/device_runners.h"
#include "tests/testing/kernel_backend.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tolerance.h"

namespace baton::kernels {
namespace {

using absl_testing::IsOk;
using absl_testing::StatusIs;
using testing::AllClose;
using testing::ToleranceFor;
using ::testing::HasSubstr;

// Independent double-precision transcription of transformers' default and llama3 inv_freq.
std::vector<double> ExpectedInvFreq(double theta, int dim, const RopeScaling& s) {
  std::vector<double> out(dim / 2);
  for (int i = 0; i < dim / 2; ++i) {
    double f = 1.0 / std::pow(theta, 2.0 * i / dim);
    if (s.type == RopeScalingType::kLinear) f /= s.factor;
    if (s.type == RopeScalingType::kLlama3) {
      const double wavelen = 2 * std::numbers::pi / f;
      const double low_wavelen = s.original_max_position / s.low_freq_factor;
      const double high_wavelen = s.original_max_position / s.high_freq_factor;
      if (wavelen > low_wavelen) {
        f /= s.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (s.original_max_position / wavelen - s.low_freq_factor) /
                              (s.high_freq_factor - s.low_freq_factor);
        f = (1 - smooth) * f / s.factor + smooth * f;
      }
    }
    out[i] = f;
  }
  return out;
}

void ExpectInvFreqClose(const std::vector<float>& actual, const std::vector<double>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], 2e-6 * expected[i]) << "i = " << i;
  }
}

TEST(RopeInvFreqTest, DefaultLinearAndLlama3MatchTransformers) {
  auto plain = RopeInvFreq(10000, 128, {});
  ASSERT_THAT(plain, IsOk());
  EXPECT_EQ((*plain)[0], 1.0f);
  ExpectInvFreqClose(*plain, ExpectedInvFreq(10000, 128, {}));

  const RopeScaling linear{.type = RopeScalingType::kLinear, .factor = 4};
  auto scaled = RopeInvFreq(10000, 64, linear);
  ASSERT_THAT(scaled, IsOk());
  ExpectInvFreqClose(*scaled, ExpectedInvFreq(10000, 64, linear));

  // Llama 3.1 8B: theta 500000, factor 8, low 1, high 4, original 8192.
  const RopeScaling llama3{.type = RopeScalingType::kLlama3, .factor = 8};
  auto llama = RopeInvFreq(500000, 128, llama3);
  ASSERT_THAT(llama, IsOk());
  ExpectInvFreqClose(*llama, ExpectedInvFreq(500000, 128, llama3));
  auto unscaled = RopeInvFreq(500000, 128, {});
  // High frequencies kept, low frequencies divided by the factor, the middle in between.
  EXPECT_EQ((*llama)[0], (*unscaled)[0]);
  EXPECT_FLOAT_EQ((*llama)[63], (*unscaled)[63] / 8);
  int num_medium = 0;
  for (int i = 0; i < 64; ++i) {
    if ((*llama)[i] < (*unscaled)[i] && (*llama)[i] > (*unscaled)[i] / 8 * 1.0001f) ++num_medium;
  }
  EXPECT_GT(num_medium, 0);
}

TEST(RopeInvFreqTest, RejectsBadConfigs) {
  EXPECT_THAT(RopeInvFreq(10000, 7, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rotary_dim")));
  EXPECT_THAT(RopeInvFreq(1, 8, {}), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("theta")));
  EXPECT_THAT(RopeInvFreq(10000, 8, {.type = RopeScalingType::kLinear, .factor = 0}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("factor")));
  EXPECT_THAT(RopeInvFreq(10000, 8,
                          {.type = RopeScalingType::kLlama3, .factor = 8, .low_freq_factor = 4,
                           .high_freq_factor = 1}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("low_freq_factor")));
}

struct RopeProblem {
  int num_tokens;
  int num_heads;
  int num_kv_heads;
  int head_dim;
  int q_stride;
  int k_stride;
  std::vector<float> q;
  std::vector<float> k;
  std::vector<int32_t> positions;
  std::vector<float> inv_freq;

  RopeProblem(int tokens, int heads, int kv_heads, int dim, uint64_t seed)
      : num_tokens(tokens),
        num_heads(heads),
        num_kv_heads(kv_heads),
        head_dim(dim),
        q_stride(heads * dim + 3),
        k_stride(kv_heads * dim + 1),
        q(kernels::reference::RandomVector(size_t(tokens) * q_stride, seed)),
        k(kernels::reference::RandomVector(size_t(tokens) * k_stride, seed + 1)),
        inv_freq(*RopeInvFreq(500000, dim, {.type = RopeScalingType::kLlama3, .factor = 8})) {
    kernels::reference::TestRng rng(seed + 2);
    for (int t = 0; t < tokens; ++t) {
      positions.push_back(t == 0 ? 0 : static_cast<int32_t>(rng.UniformInt(1, 100000)));
    }
  }
  RopeParams Params() {
    return {.q = q.data(),
            .k = k.data(),
            .positions = positions.data(),
            .inv_freq = inv_freq.data(),
            .num_tokens = num_tokens,
            .num_heads = num_heads,
            .num_kv_heads = num_kv_heads,
            .head_dim = head_dim,
            .q_stride = q_stride,
            .k_stride = k_stride};
  }
};

// Angles reach 1e5 radians, where one f32 ulp of the angle is ~0.008: both sides use the same f32
// angle, and cos/sin of it differ only in their own rounding.
constexpr testing::Tolerance kRopeTolerance = {.atol = 2e-6, .rtol = 1e-5};

// (a) fast CPU vs reference.
class RopeCpuTest : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(RopeCpuTest, MatchesReference) {
  const auto [num_tokens, head_dim, num_threads] = GetParam();
  RopeProblem fast(num_tokens, 8, 2, head_dim, 17);
  RopeProblem ref(num_tokens, 8, 2, head_dim, 17);
  ThreadPool pool(num_threads);
  ASSERT_THAT(RopeCpu(fast.Params(), &pool), IsOk());
  reference::Rope(ref.Params());
  EXPECT_TRUE(AllClose(fast.q, ref.q, kRopeTolerance));
  EXPECT_TRUE(AllClose(fast.k, ref.k, kRopeTolerance));
}

INSTANTIATE_TEST_SUITE_P(Shapes, RopeCpuTest,
                         ::testing::Combine(::testing::Values(1, 12, 17, 200),
                                            ::testing::Values(2, 6, 64, 128),
                                            ::testing::Values(1, 2)));

// (c) position 0 is the identity; rotation keeps every (i, i + half) pair's norm; padding columns
// beyond the heads are untouched.
TEST(RopeCpuTest, PositionZeroIsIdentityAndNormsArePreserved) {
  RopeProblem problem(9, 4, 2, 64, 3);
  const std::vector<float> q_before = problem.q;
  ASSERT_THAT(RopeCpu(problem.Params(), nullptr), IsOk());
  for (int i = 0; i < 4 * 64; ++i) EXPECT_EQ(problem.q[i], q_before[i]);  // token 0: position 0
  for (int t = 1; t < 9; ++t) {
    for (int h = 0; h < 4; ++h) {
      for (int i = 0; i < 32; ++i) {
        const size_t lo = size_t(t) * problem.q_stride + h * 64 + i;
        const double before = std::hypot(q_before[lo], q_before[lo + 32]);
        EXPECT_NEAR(std::hypot(problem.q[lo], problem.q[lo + 32]), before, 1e-6);
      }
    }
    for (int pad = 4 * 64; pad < problem.q_stride; ++pad) {
      EXPECT_EQ(problem.q[size_t(t) * problem.q_stride + pad],
                q_before[size_t(t) * problem.q_stride + pad]);
    }
  }
}

TEST(RopeCpuTest, RejectsNegativePositionsAndOddHeadDim) {
  RopeProblem problem(4, 2, 1, 8, 5);
  problem.positions[2] = -1;
  EXPECT_THAT(RopeCpu(problem.Params(), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("token 2")));
  RopeParams p = problem.Params();
  p.head_dim = 7;
  EXPECT_THAT(RopeCpu(p, nullptr), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("even")));
}

// (b) the CUDA kernel (emulated, or on a GPU) vs the CPU twin.
using Backend = testing::KernelBackend<RopeParams>;
class RopeKernelTest : public ::testing::TestWithParam<std::tuple<Backend, int, int>> {};

TEST_P(RopeKernelTest, MatchesCpu) {
  const auto [backend, num_tokens, head_dim] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  RopeProblem expected(num_tokens, 8, 2, head_dim, 23);
  RopeProblem actual(num_tokens, 8, 2, head_dim, 23);
  ASSERT_THAT(RopeCpu(expected.Params(), nullptr), IsOk());
  ASSERT_THAT(backend.run(actual.Params()), IsOk());
  EXPECT_TRUE(AllClose(actual.q, expected.q, kRopeTolerance));
  EXPECT_TRUE(AllClose(actual.k, expected.k, kRopeTolerance));
}

std::string KernelTestName(const ::testing::TestParamInfo<std::tuple<Backend, int, int>>& info) {
  return std::string(std::get<0>(info.param).name) + "_t" +
         std::to_string(std::get<1>(info.param)) + "_d" + std::to_string(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    Emulated, RopeKernelTest,
    ::testing::Combine(::testing::Values(Backend{"emulated", &RopeEmulated,
                                                 &testing::AlwaysAvailable}),
                       ::testing::Values(1, 12, 17), ::testing::Values(6, 64, 128)),
    KernelTestName);
#if BATON_HAS_CUDA
INSTANTIATE_TEST_SUITE_P(
    Cuda, RopeKernelTest,
    ::testing::Combine(::testing::Values(Backend{"cuda", &testing::RopeOnDevice,
                                                 &testing::CudaDeviceAvailable}),
                       ::testing::Values(1, 17, 512), ::testing::Values(6, 64, 128)),
    KernelTestName);
#endif

}  // namespace
}  // namespace baton::kernels
