#include "baton/kernels/add.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/reference/random_tensor.h"
#include "kernels/reference/reference_ops.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tolerance.h"

namespace baton::kernels {
namespace {

using absl_testing::IsOk;
using absl_testing::StatusIs;
using testing::AllClose;

TEST(AddCpuTest, MatchesReferenceExactlyForManySizes) {
  ThreadPool pool(2);
  for (int64_t n : {0, 1, 15, 16, 17, 4095, 4097, 100000, 1 << 20}) {
    const std::vector<float> a = kernels::reference::RandomVector(n, 1);
    const std::vector<float> b = kernels::reference::RandomVector(n, 2);
    std::vector<float> out(n);
    std::vector<float> expected(n);
    ASSERT_THAT(AddCpu(out.data(), a.data(), b.data(), n, &pool), IsOk());
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
  ASSERT_THAT(AddCpu(a.data(), a.data(), b.data(), static_cast<int64_t>(a.size()), &pool), IsOk());
  EXPECT_TRUE(AllClose(a, expected, {0, 0}));
}

TEST(AddCpuTest, RejectsBadArguments) {
  float x = 0;
  EXPECT_THAT(AddCpu(&x, &x, &x, -1, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(AddCpu(&x, nullptr, &x, 1, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(AddCpu(nullptr, nullptr, nullptr, 0, nullptr), IsOk());
}

}  // namespace
}  // namespace baton::kernels
