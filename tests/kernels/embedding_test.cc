#include "baton/kernels/embedding.h"

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
using ::testing::HasSubstr;

constexpr int kVocab = 301;

// A random table in `dtype` (raw bits) and random ids (repeats allowed).
struct EmbeddingProblem {
  DType dtype;
  int num_tokens;
  int hidden;
  std::vector<uint16_t> table16;
  std::vector<float> table32;
  std::vector<int32_t> ids;
  std::vector<float> out;

  EmbeddingProblem(DType dt, int tokens, int hid, uint64_t seed)
      : dtype(dt), num_tokens(tokens), hidden(hid), out(size_t(tokens) * hid, -7.0f) {
    const std::vector<float> values = kernels::reference::RandomVector(size_t(kVocab) * hid, seed, -2, 2);
    if (dt == DType::kF32) {
      table32 = values;
    } else {
      for (float x : values) table16.push_back(dt == DType::kBF16 ? F32ToBf16(x) : F32ToF16(x));
    }
    kernels::reference::TestRng rng(seed + 1);
    for (int t = 0; t < tokens; ++t) ids.push_back(static_cast<int32_t>(rng.UniformInt(0, kVocab - 1)));
  }
  EmbeddingParams Params(float* out_ptr) const {
    return {.out = out_ptr,
            .table = dtype == DType::kF32 ? static_cast<const void*>(table32.data())
                                          : static_cast<const void*>(table16.data()),
            .table_dtype = dtype,
            .token_ids = ids.data(),
            .num_tokens = num_tokens,
            .hidden = hidden,
            .vocab_size = kVocab};
  }
};

// (a) fast CPU vs reference: a gather and an exact conversion, so bit-identical.
class EmbeddingCpuTest : public ::testing::TestWithParam<std::tuple<DType, int, int>> {};

TEST_P(EmbeddingCpuTest, MatchesReferenceExactly) {
  const auto [dtype, num_tokens, hidden] = GetParam();
  EmbeddingProblem problem(dtype, num_tokens, hidden, 3);
  ThreadPool pool(2);
  ASSERT_THAT(EmbeddingCpu(problem.Params(problem.out.data()), &pool), IsOk());
  std::vector<float> expected(problem.out.size());
  reference::Embedding(problem.Params(expected.data()));
  EXPECT_TRUE(AllClose(problem.out, expected, {0, 0}));
}

INSTANTIATE_TEST_SUITE_P(Shapes, EmbeddingCpuTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16,
                                                              DType::kF16),
                                            ::testing::Values(1, 12, 17, 500),
                                            ::testing::Values(1, 33, 1000)));

TEST(EmbeddingCpuTest, OutOfRangeIdIsRejectedBeforeWriting) {
  EmbeddingProblem problem(DType::kBF16, 5, 8, 1);
  problem.ids[3] = kVocab;
  EXPECT_THAT(EmbeddingCpu(problem.Params(problem.out.data()), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("token id 301 at position 3")));
  for (float x : problem.out) EXPECT_EQ(x, -7.0f);
  problem.ids[3] = -2;
  EXPECT_THAT(EmbeddingCpu(problem.Params(problem.out.data()), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("token id -2")));
}

// (b) the CUDA kernel (emulated, or on a GPU) vs the CPU twin.
using Backend = testing::KernelBackend<EmbeddingParams>;
class EmbeddingKernelTest : public ::testing::TestWithParam<std::tuple<Backend, DType, int>> {};

TEST_P(EmbeddingKernelTest, MatchesCpuExactly) {
  const auto [backend, dtype, hidden] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  EmbeddingProblem problem(dtype, 17, hidden, 9);
  std::vector<float> expected(problem.out.size());
  ASSERT_THAT(EmbeddingCpu(problem.Params(expected.data()), nullptr), IsOk());
  ASSERT_THAT(backend.run(problem.Params(problem.out.data())), IsOk());
  EXPECT_TRUE(AllClose(problem.out, expected, {0, 0}));
}

TEST_P(EmbeddingKernelTest, OutOfRangeIdGivesNanRow) {
  const auto [backend, dtype, hidden] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  EmbeddingProblem problem(dtype, 3, hidden, 9);
  problem.ids[1] = kVocab + 5;
  ASSERT_THAT(backend.run(problem.Params(problem.out.data())), IsOk());
  for (int d = 0; d < hidden; ++d) {
    EXPECT_TRUE(std::isnan(problem.out[hidden + d]));
    EXPECT_FALSE(std::isnan(problem.out[d]));
  }
}

std::string KernelTestName(
    const ::testing::TestParamInfo<std::tuple<Backend, DType, int>>& info) {
  return std::string(std::get<0>(info.param).name) + "_" +
         std::string(DTypeName(std::get<1>(info.param))) + "_h" +
         std::to_string(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    Emulated, EmbeddingKernelTest,
    ::testing::Combine(::testing::Values(Backend{"emulated", &EmbeddingEmulated,
                                                 &testing::AlwaysAvailable}),
                       ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                       ::testing::Values(1, 300)),
    KernelTestName);
#if BATON_HAS_CUDA
INSTANTIATE_TEST_SUITE_P(
    Cuda, EmbeddingKernelTest,
    ::testing::Combine(::testing::Values(Backend{"cuda", &testing::EmbeddingOnDevice,
                                                 &testing::CudaDeviceAvailable}),
                       ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                       ::testing::Values(1, 300, 4096)),
    KernelTestName);
#endif

}  // namespace
}  // namespace baton::kernels
