#include "baton/kernels/add_rms_norm.h"

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "baton/kernels/add.h"
#include "baton/kernels/rms_norm.h"
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
using kernels::reference::RandomVector;
using testing::AllClose;
using testing::ToleranceFor;
using ::testing::HasSubstr;

constexpr testing::Tolerance kExact = {0, 0};

struct Shape {
  int num_tokens;
  int hidden;
};

// The residual stream, a sublayer's output to add to it, the norm's weight, and an output.
struct Buffers {
  std::vector<float> residual;
  std::vector<float> in;
  std::vector<float> weight;
  std::vector<float> out;

  Buffers(Shape shape, uint64_t seed)
      : residual(RandomVector(size_t(shape.num_tokens) * shape.hidden, seed, -3, 3)),
        in(RandomVector(residual.size(), seed + 1, -1, 1)),
        weight(RandomVector(shape.hidden, seed + 2, 0.5, 1.5)),
        out(residual.size(), -1.0f) {}

  // `residual_ptr` and `out_ptr` point into copies the caller owns, so one Buffers serves several
  // runs.
  AddRmsNormParams Params(Shape shape, float* residual_ptr, float* out_ptr) const {
    return {.out = out_ptr,
            .residual = residual_ptr,
            .in = in.data(),
            .weight = weight.data(),
            .num_tokens = shape.num_tokens,
            .hidden = shape.hidden,
            .eps = 1e-5f};
  }
};

// Expected residual and output from the reference.
struct Expected {
  std::vector<float> residual;
  std::vector<float> out;
};

Expected Reference(const Buffers& b, Shape shape) {
  Expected e{b.residual, std::vector<float>(b.residual.size())};
  reference::AddRmsNorm(b.Params(shape, e.residual.data(), e.out.data()));
  return e;
}

// (a) the CPU twin vs the reference, threaded and not.
class AddRmsNormCpuTest : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(AddRmsNormCpuTest, MatchesReference) {
  const auto [num_tokens, hidden, num_threads] = GetParam();
  const Shape shape{num_tokens, hidden};
  Buffers b(shape, 7);
  std::unique_ptr<ThreadPool> pool =
      num_threads > 1 ? std::make_unique<ThreadPool>(num_threads) : nullptr;
  std::vector<float> residual = b.residual;
  ASSERT_THAT(AddRmsNormCpu(b.Params(shape, residual.data(), b.out.data()), pool.get()), IsOk());
  const Expected expected = Reference(b, shape);
  EXPECT_TRUE(AllClose(residual, expected.residual, kExact));  // one f32 add per element
  EXPECT_TRUE(AllClose(b.out, expected.out, ToleranceFor(DType::kF32)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, AddRmsNormCpuTest,
                         ::testing::Combine(::testing::Values(1, 12, 17),
                                            ::testing::Values(1, 7, 64, 1000, 4096),
                                            ::testing::Values(1, 2)));

// (c) the fusion changes no bit: AddCpu then RmsNormCpu of the residual give the same numbers, so
// the forward pass on the CPU is unchanged by it.
TEST(AddRmsNormCpuTest, EqualsAddThenRmsNormBitForBit) {
  for (const Shape shape : {Shape{17, 1000}, Shape{3, 4096}, Shape{5, 37}}) {
    Buffers b(shape, 9 + shape.hidden);
    ThreadPool pool(2);
    std::vector<float> fused_residual = b.residual;
    ASSERT_THAT(AddRmsNormCpu(b.Params(shape, fused_residual.data(), b.out.data()), &pool), IsOk());

    std::vector<float> residual = b.residual;
    std::vector<float> out(b.out.size());
    const int64_t n = int64_t{shape.num_tokens} * shape.hidden;
    ASSERT_THAT(AddCpu({.out = residual.data(), .a = residual.data(), .b = b.in.data(), .n = n},
                       &pool),
                IsOk());
    ASSERT_THAT(RmsNormCpu({.out = out.data(), .in = residual.data(), .weight = b.weight.data(),
                            .num_tokens = shape.num_tokens, .hidden = shape.hidden, .eps = 1e-5f},
                           &pool),
                IsOk());
    EXPECT_TRUE(AllClose(fused_residual, residual, kExact)) << "hidden " << shape.hidden;
    EXPECT_TRUE(AllClose(b.out, out, kExact)) << "hidden " << shape.hidden;
  }
}

// The forward pass writes the normalized rows over the sublayer's output.
TEST(AddRmsNormCpuTest, OutMayAliasIn) {
  const Shape shape{5, 333};
  Buffers b(shape, 11);
  const Expected expected = Reference(b, shape);
  std::vector<float> residual = b.residual;
  AddRmsNormParams p = b.Params(shape, residual.data(), b.in.data());
  p.out = b.in.data();
  ASSERT_THAT(AddRmsNormCpu(p, nullptr), IsOk());
  EXPECT_TRUE(AllClose(residual, expected.residual, kExact));
  EXPECT_TRUE(AllClose(b.in, expected.out, ToleranceFor(DType::kF32)));
}

// (c) each row depends on that row only.
TEST(AddRmsNormCpuTest, BatchedEqualsPerRow) {
  const Shape shape{17, 1000};
  Buffers b(shape, 13);
  ThreadPool pool(2);
  std::vector<float> residual = b.residual;
  ASSERT_THAT(AddRmsNormCpu(b.Params(shape, residual.data(), b.out.data()), &pool), IsOk());
  std::vector<float> row_residual(shape.hidden), row_out(shape.hidden);
  for (int t = 0; t < shape.num_tokens; ++t) {
    std::copy_n(b.residual.begin() + t * shape.hidden, shape.hidden, row_residual.begin());
    AddRmsNormParams p = b.Params({1, shape.hidden}, row_residual.data(), row_out.data());
    p.in = b.in.data() + t * shape.hidden;
    ASSERT_THAT(AddRmsNormCpu(p, nullptr), IsOk());
    for (int d = 0; d < shape.hidden; ++d) {
      ASSERT_EQ(row_out[d], b.out[t * shape.hidden + d]) << "token " << t << " dim " << d;
      ASSERT_EQ(row_residual[d], residual[t * shape.hidden + d]) << "token " << t << " dim " << d;
    }
  }
}

TEST(AddRmsNormCpuTest, RejectsBadParams) {
  const Shape shape{2, 8};
  Buffers b(shape, 1);
  std::vector<float> residual = b.residual;
  const AddRmsNormParams good = b.Params(shape, residual.data(), b.out.data());
  AddRmsNormParams p = good;
  p.weight = nullptr;
  EXPECT_THAT(AddRmsNormCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("weight")));
  p = good;
  p.residual = nullptr;
  EXPECT_THAT(AddRmsNormCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("residual is null")));
  p = good;
  p.out = p.residual;
  EXPECT_THAT(AddRmsNormCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("out is residual")));
  p = good;
  p.hidden = 0;
  EXPECT_THAT(AddRmsNormCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("hidden")));
  p = good;
  p.eps = -1;
  EXPECT_THAT(AddRmsNormCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("eps")));
  EXPECT_EQ(residual, b.residual);  // nothing written by a rejected call
  p = b.Params({0, 8}, nullptr, nullptr);
  p.in = nullptr;
  EXPECT_THAT(AddRmsNormCpu(p, nullptr), IsOk());  // nothing to do
}

// (b) the CUDA kernel (emulated, or on a GPU) vs the CPU twin.
using Backend = testing::KernelBackend<AddRmsNormParams>;
class AddRmsNormKernelTest : public ::testing::TestWithParam<std::tuple<Backend, int, int>> {};

TEST_P(AddRmsNormKernelTest, MatchesCpu) {
  const auto [backend, num_tokens, hidden] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  const Shape shape{num_tokens, hidden};
  Buffers b(shape, 21);
  std::vector<float> expected_residual = b.residual;
  std::vector<float> expected(b.out.size());
  ASSERT_THAT(AddRmsNormCpu(b.Params(shape, expected_residual.data(), expected.data()), nullptr),
              IsOk());
  std::vector<float> residual = b.residual;
  ASSERT_THAT(backend.run(b.Params(shape, residual.data(), b.out.data())), IsOk());
  EXPECT_TRUE(AllClose(residual, expected_residual, kExact));
  EXPECT_TRUE(AllClose(b.out, expected, ToleranceFor(DType::kF32)));
}

TEST_P(AddRmsNormKernelTest, OutMayAliasIn) {
  const auto [backend, num_tokens, hidden] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  const Shape shape{num_tokens, hidden};
  Buffers b(shape, 23);
  std::vector<float> expected_residual = b.residual;
  std::vector<float> expected(b.out.size());
  ASSERT_THAT(AddRmsNormCpu(b.Params(shape, expected_residual.data(), expected.data()), nullptr),
              IsOk());
  std::vector<float> residual = b.residual;
  AddRmsNormParams p = b.Params(shape, residual.data(), b.in.data());
  ASSERT_THAT(backend.run(p), IsOk());
  EXPECT_TRUE(AllClose(residual, expected_residual, kExact));
  EXPECT_TRUE(AllClose(b.in, expected, ToleranceFor(DType::kF32)));
}

std::string KernelTestName(const ::testing::TestParamInfo<std::tuple<Backend, int, int>>& info) {
  return std::string(std::get<0>(info.param).name) + "_t" +
         std::to_string(std::get<1>(info.param)) + "_h" + std::to_string(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    Emulated, AddRmsNormKernelTest,
    ::testing::Combine(::testing::Values(Backend{"emulated", &AddRmsNormEmulated,
                                                 &testing::AlwaysAvailable}),
                       ::testing::Values(1, 3, 17), ::testing::Values(1, 33, 255, 1000)),
    KernelTestName);
#if BATON_HAS_CUDA
INSTANTIATE_TEST_SUITE_P(
    Cuda, AddRmsNormKernelTest,
    ::testing::Combine(::testing::Values(Backend{"cuda", &testing::AddRmsNormOnDevice,
                                                 &testing::CudaDeviceAvailable}),
                       ::testing::Values(1, 3, 17, 512), ::testing::Values(1, 33, 255, 4096)),
    KernelTestName);
#endif

}  // namespace
}  // namespace baton::kernels
