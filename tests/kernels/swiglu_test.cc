#include "baton/kernels/swiglu.h"

#include <cmath>
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
using testing::AllFinite;
using testing::ToleranceFor;
using ::testing::HasSubstr;

// gate and up interleaved in one [num_tokens, 2 * intermediate + 1] buffer, as a fused gate/up
// projection produces them; out has its own stride.
struct SwigluProblem {
  int num_tokens;
  int intermediate;
  int in_stride;
  int out_stride;
  std::vector<float> gate_up;
  std::vector<float> out;

  SwigluProblem(int tokens, int inter, uint64_t seed, float range = 6)
      : num_tokens(tokens),
        intermediate(inter),
        in_stride(2 * inter + 1),
        out_stride(inter + 2),
        gate_up(kernels::reference::RandomVector(size_t(tokens) * in_stride, seed, -range, range)),
        out(size_t(tokens) * out_stride, -3.0f) {}

  SwigluParams Params(float* out_ptr, int out_stride_override = 0) const {
    return {.out = out_ptr,
            .gate = gate_up.data(),
            .up = gate_up.data() + intermediate,
            .num_tokens = num_tokens,
            .intermediate = intermediate,
            .in_stride = in_stride,
            .out_stride = out_stride_override > 0 ? out_stride_override : out_stride};
  }
};

class SwigluCpuTest : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(SwigluCpuTest, MatchesReference) {
  const auto [num_tokens, intermediate, num_threads] = GetParam();
  SwigluProblem problem(num_tokens, intermediate, 5);
  ThreadPool pool(num_threads);
  ASSERT_THAT(SwigluCpu(problem.Params(problem.out.data()), &pool), IsOk());
  std::vector<float> expected(problem.out.size(), -3.0f);
  reference::Swiglu(problem.Params(expected.data()));
  EXPECT_TRUE(AllClose(problem.out, expected, ToleranceFor(DType::kF32)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, SwigluCpuTest,
                         ::testing::Combine(::testing::Values(1, 12, 17),
                                            ::testing::Values(1, 15, 16, 17, 1000, 5632),
                                            ::testing::Values(1, 2)));

TEST(SwigluCpuTest, OutMayAliasGate) {
  SwigluProblem problem(7, 333, 8);
  std::vector<float> expected(problem.out.size(), -3.0f);
  reference::Swiglu(problem.Params(expected.data()));
  ASSERT_THAT(SwigluCpu(problem.Params(problem.gate_up.data(), problem.in_stride), nullptr), IsOk());
  for (int t = 0; t < 7; ++t) {
    for (int i = 0; i < 333; ++i) {
      const float e = expected[t * problem.out_stride + i];
      EXPECT_NEAR(problem.gate_up[t * problem.in_stride + i], e, 1e-5 + 1e-5 * std::abs(e));
    }
  }
}

TEST(SwigluCpuTest, ExtremeInputsStayFinite) {
  SwigluProblem problem(3, 100, 2, /*range=*/80);
  ASSERT_THAT(SwigluCpu(problem.Params(problem.out.data()), nullptr), IsOk());
  std::vector<float> expected(problem.out.size(), -3.0f);
  reference::Swiglu(problem.Params(expected.data()));
  EXPECT_TRUE(AllFinite(problem.out));
  EXPECT_TRUE(AllClose(problem.out, expected, ToleranceFor(DType::kF32)));
}

TEST(SwigluCpuTest, RejectsShortStrides) {
  SwigluProblem problem(2, 10, 1);
  SwigluParams p = problem.Params(problem.out.data());
  p.out_stride = 9;
  EXPECT_THAT(SwigluCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("out_stride")));
}

using Backend = testing::KernelBackend<SwigluParams>;
class SwigluKernelTest : public ::testing::TestWithParam<std::tuple<Backend, int, int>> {};

TEST_P(SwigluKernelTest, MatchesCpu) {
  const auto [backend, num_tokens, intermediate] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  SwigluProblem problem(num_tokens, intermediate, 12);
  std::vector<float> expected(problem.out.size(), -3.0f);
  ASSERT_THAT(SwigluCpu(problem.Params(expected.data()), nullptr), IsOk());
  ASSERT_THAT(backend.run(problem.Params(problem.out.data())), IsOk());
  EXPECT_TRUE(AllClose(problem.out, expected, ToleranceFor(DType::kF32)));
}

std::string KernelTestName(const ::testing::TestParamInfo<std::tuple<Backend, int, int>>& info) {
  return std::string(std::get<0>(info.param).name) + "_t" +
         std::to_string(std::get<1>(info.param)) + "_i" + std::to_string(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    Emulated, SwigluKernelTest,
    ::testing::Combine(::testing::Values(Backend{"emulated", &SwigluEmulated,
                                                 &testing::AlwaysAvailable}),
                       ::testing::Values(1, 12, 17), ::testing::Values(1, 257)),
    KernelTestName);
#if BATON_HAS_CUDA
INSTANTIATE_TEST_SUITE_P(
    Cuda, SwigluKernelTest,
    ::testing::Combine(::testing::Values(Backend{"cuda", &testing::SwigluOnDevice,
                                                 &testing::CudaDeviceAvailable}),
                       ::testing::Values(1, 17, 512), ::testing::Values(1, 257, 5632)),
    KernelTestName);
#endif

}  // namespace
}  // namespace baton::kernels
