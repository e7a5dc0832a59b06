#include "baton/kernels/rms_norm.h"

#include <memory>
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
using kernels::reference::RandomVector;
using testing::ToleranceFor;
using ::testing::HasSubstr;

struct Shape {
  int num_tokens;
  int hidden;
};

struct Buffers {
  std::vector<float> in;
  std::vector<float> weight;
  std::vector<float> out;

  Buffers(Shape shape, uint64_t seed)
      : in(RandomVector(size_t(shape.num_tokens) * shape.hidden, seed, -3, 3)),
        weight(RandomVector(shape.hidden, seed + 1, 0.5, 1.5)),
        out(in.size(), -1.0f) {}

  RmsNormParams Params(Shape shape, float* out_ptr) const {
    return {.out = out_ptr,
            .in = in.data(),
            .weight = weight.data(),
            .num_tokens = shape.num_tokens,
            .hidden = shape.hidden,
            .eps = 1e-5f};
  }
};

std::vector<float> Reference(const Buffers& b, Shape shape) {
  std::vector<float> expected(b.in.size());
  reference::RmsNorm(b.Params(shape, expected.data()));
  return expected;
}

// (a) fast CPU vs the reference, threaded and not.
class RmsNormCpuTest : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(RmsNormCpuTest, MatchesReference) {
  const auto [num_tokens, hidden, num_threads] = GetParam();
  const Shape shape{num_tokens, hidden};
  Buffers b(shape, 7);
  std::unique_ptr<ThreadPool> pool = num_threads > 1 ? std::make_unique<ThreadPool>(num_threads)
                                                      : nullptr;
  ASSERT_THAT(RmsNormCpu(b.Params(shape, b.out.data()), pool.get()), IsOk());
  EXPECT_TRUE(AllClose(b.out, Reference(b, shape), ToleranceFor(DType::kF32)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormCpuTest,
                         ::testing::Combine(::testing::Values(1, 12, 17),
                                            ::testing::Values(1, 7, 64, 1000, 4096),
                                            ::testing::Values(1, 2)));

TEST(RmsNormCpuTest, OutMayAliasIn) {
  const Shape shape{5, 333};
  Buffers b(shape, 11);
  const std::vector<float> expected = Reference(b, shape);
  ASSERT_THAT(RmsNormCpu(b.Params(shape, b.in.data()), nullptr), IsOk());
  EXPECT_TRUE(AllClose(b.in, expected, ToleranceFor(DType::kF32)));
}

// (c) each row depends on that row only: the batched result equals row-by-row calls exactly.
TEST(RmsNormCpuTest, BatchedEqualsPerRow) {
  const Shape shape{17, 1000};
  Buffers b(shape, 13);
  ThreadPool pool(2);
  ASSERT_THAT(RmsNormCpu(b.Params(shape, b.out.data()), &pool), IsOk());
  std::vector<float> row_out(shape.hidden);
  for (int t = 0; t < shape.num_tokens; ++t) {
    RmsNormParams p = b.Params({1, shape.hidden}, row_out.data());
    p.in = b.in.data() + t * shape.hidden;
    ASSERT_THAT(RmsNormCpu(p, nullptr), IsOk());
    for (int d = 0; d < shape.hidden; ++d) {
      ASSERT_EQ(row_out[d], b.out[t * shape.hidden + d]) << "token " << t << " dim " << d;
    }
  }
}

TEST(RmsNormCpuTest, RejectsBadParams) {
  const Shape shape{2, 8};
  Buffers b(shape, 1);
  RmsNormParams p = b.Params(shape, b.out.data());
  p.weight = nullptr;
  EXPECT_THAT(RmsNormCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("weight")));
  p = b.Params(shape, b.out.data());
  p.hidden = 0;
  EXPECT_THAT(RmsNormCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("hidden")));
  p = b.Params(shape, b.out.data());
  p.eps = -1;
  EXPECT_THAT(RmsNormCpu(p, nullptr), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("eps")));
  p = b.Params({0, 8}, nullptr);
  p.in = nullptr;
  EXPECT_THAT(RmsNormCpu(p, nullptr), IsOk());  // nothing to do
}

// (b) the CUDA kernel (emulated, or on a GPU) vs the CPU twin.
using Backend = testing::KernelBackend<RmsNormParams>;
class RmsNormKernelTest : public ::testing::TestWithParam<std::tuple<Backend, int, int>> {};

TEST_P(RmsNormKernelTest, MatchesCpu) {
  const auto [backend, num_tokens, hidden] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  const Shape shape{num_tokens, hidden};
  Buffers b(shape, 21);
  std::vector<float> expected(b.in.size());
  ASSERT_THAT(RmsNormCpu(b.Params(shape, expected.data()), nullptr), IsOk());
  ASSERT_THAT(backend.run(b.Params(shape, b.out.data())), IsOk());
  EXPECT_TRUE(AllClose(b.out, expected, ToleranceFor(DType::kF32)));
}

TEST_P(RmsNormKernelTest, OutMayAliasIn) {
  const auto [backend, num_tokens, hidden] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  const Shape shape{num_tokens, hidden};
  Buffers b(shape, 23);
  std::vector<float> expected(b.in.size());
  ASSERT_THAT(RmsNormCpu(b.Params(shape, expected.data()), nullptr), IsOk());
  ASSERT_THAT(backend.run(b.Params(shape, b.in.data())), IsOk());
  EXPECT_TRUE(AllClose(b.in, expected, ToleranceFor(DType::kF32)));
}

std::string KernelTestName(
    const ::testing::TestParamInfo<std::tuple<Backend, int, int>>& info) {
  return std::string(std::get<0>(info.param).name) + "_t" +
         std::to_string(std::get<1>(info.param)) + "_h" + std::to_string(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    Emulated, RmsNormKernelTest,
    ::testing::Combine(::testing::Values(Backend{"emulated", &RmsNormEmulated,
                                                 &testing::AlwaysAvailable}),
                       ::testing::Values(1, 3, 17), ::testing::Values(1, 33, 255, 1000)),
    KernelTestName);
#if BATON_HAS_CUDA
INSTANTIATE_TEST_SUITE_P(
    Cuda, RmsNormKernelTest,
    ::testing::Combine(::testing::Values(Backend{"cuda", &testing::RmsNormOnDevice,
                                                 &testing::CudaDeviceAvailable}),
                       ::testing::Values(1, 3, 17, 512), ::testing::Values(1, 33, 255, 4096)),
    KernelTestName);
#endif

}  // namespace
}  // namespace baton::kernels
