// The residual add in three layers: (a) the CPU twin against the reference, (b) the CUDA kernel
// (emulated always, on a GPU when there is one) against the CPU twin, (c) argument checks.
#include "baton/kernels/add.h"

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
using ::testing::HasSubstr;

AddParams Params(float* out, const std::vector<float>& a, const std::vector<float>& b) {
  return {.out = out, .a = a.data(), .b = b.data(), .n = static_cast<int64_t>(a.size())};
}

TEST(AddCpuTest, MatchesReferenceExactlyForManySizes) {
  ThreadPool pool(2);
  for (int64_t n : {0, 1, 15, 16, 17, 4095, 4097, 100000, 1 << 20}) {
    const std::vector<float> a = kernels::reference::RandomVector(n, 1);
    const std::vector<float> b = kernels::reference::RandomVector(n, 2);
    std::vector<float> out(n);
    std::vector<float> expected(n);
    ASSERT_THAT(AddCpu(Params(out.data(), a, b), &pool), IsOk());
    reference::Add(expected.data(), a.data(), b.data(), n);
    EXPECT_TRUE(AllClose(out, expected, {0, 0})) << "n = " << n;
  }
}

TEST(AddCpuTest, OutMayAliasAnInput) {
  std::vector<float> a = kernels::reference::RandomVector(300001, 3);
  const std::vector<float> b = kernels::reference::RandomVector(300001, 4);
  std::vector<float> expected(a.size());
  reference::Add(expected.data(), a.data(), b.data(), static_cast<int64_t>(a.size()));
  ThreadPool pool(2);
  ASSERT_THAT(AddCpu(Params(a.data(), a, b), &pool), IsOk());
  EXPECT_TRUE(AllClose(a, expected, {0, 0}));
}

TEST(AddCpuTest, RejectsBadArguments) {
  float x = 0;
  EXPECT_THAT(AddCpu({.out = &x, .a = &x, .b = &x, .n = -1}, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("n = -1")));
  EXPECT_THAT(AddCpu({.out = &x, .a = nullptr, .b = &x, .n = 1}, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a is null")));
  EXPECT_THAT(AddCpu({.out = nullptr, .a = nullptr, .b = nullptr, .n = 0}, nullptr), IsOk());
}

using Backend = testing::KernelBackend<AddParams>;
class AddKernelTest : public ::testing::TestWithParam<std::tuple<Backend, int>> {};

// A float add is exact in any order: the kernel must match the twin bit for bit.
TEST_P(AddKernelTest, MatchesCpuExactly) {
  const auto [backend, n] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  const std::vector<float> a = kernels::reference::RandomVector(n, 7);
  const std::vector<float> b = kernels::reference::RandomVector(n, 8);
  std::vector<float> expected(n, -3.0f), out(n, -3.0f);
  ASSERT_THAT(AddCpu(Params(expected.data(), a, b), nullptr), IsOk());
  ASSERT_THAT(backend.run(Params(out.data(), a, b)), IsOk());
  EXPECT_TRUE(AllClose(out, expected, {0, 0}));
}

TEST_P(AddKernelTest, OutMayAliasAnInput) {
  const auto [backend, n] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  std::vector<float> a = kernels::reference::RandomVector(n, 9);
  const std::vector<float> b = kernels::reference::RandomVector(n, 10);
  std::vector<float> expected(n);
  reference::Add(expected.data(), a.data(), b.data(), n);
  ASSERT_THAT(backend.run(Params(a.data(), a, b)), IsOk());
  EXPECT_TRUE(AllClose(a, expected, {0, 0}));
}

std::string KernelTestName(const ::testing::TestParamInfo<std::tuple<Backend, int>>& info) {
  return std::string(std::get<0>(info.param).name) + "_n" + std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    Emulated, AddKernelTest,
    ::testing::Combine(::testing::Values(Backend{"emulated", &AddEmulated,
                                                 &testing::AlwaysAvailable}),
                       ::testing::Values(0, 1, 255, 256, 257, 1000)),
    KernelTestName);
#if BATON_HAS_CUDA
INSTANTIATE_TEST_SUITE_P(
    Cuda, AddKernelTest,
    ::testing::Combine(::testing::Values(Backend{"cuda", &testing::AddOnDevice,
                                                 &testing::CudaDeviceAvailable}),
                       ::testing::Values(0, 1, 257, 1 << 20, 3 << 20)),
    KernelTestName);
#endif

}  // namespace
}  // namespace baton::kernels
