#include "baton/kernels/prefill_attention.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/dtype.h"
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

struct PrefillCase {
  int batch;
  int max_kv_len;
  int group;  // query heads per kv head
  int head_dim = 64;
  int num_kv_heads = 2;
};

std::string CaseName(const PrefillCase& c) {
  return absl::StrCat("b", c.batch, "_kv", c.max_kv_len, "_g", c.group, "_d", c.head_dim, "_h",
                      c.num_kv_heads);
}

// A ragged batch: sequence 0 is a full prompt of max_kv_len; odd sequences are chunks (q_len <
// kv_len, earlier positions only in K/V); sequence 2 (if any) has no queries at all.
struct PrefillProblem {
  PrefillCase c;
  int num_heads;
  int q_stride;
  int kv_stride;
  std::vector<int32_t> q_start{0};
  std::vector<int32_t> kv_start{0};
  std::vector<float> q;
  std::vector<float> k;
  std::vector<float> v;
  std::vector<float> out;

  PrefillProblem(const PrefillCase& pc, uint64_t seed)
      : c(pc),
        num_heads(pc.num_kv_heads * pc.group),
        q_stride(num_heads * pc.head_dim + 5),
        kv_stride(pc.num_kv_heads * pc.head_dim + 3) {
    kernels::reference::TestRng rng(seed);
    for (int s = 0; s < c.batch; ++s) {
      const int kv_len = s == 0 ? c.max_kv_len : static_cast<int>(rng.UniformInt(1, c.max_kv_len));
      int q_len = kv_len;
      if (s % 2 == 1) q_len = static_cast<int>(rng.UniformInt(1, kv_len));
      if (s == 2) q_len = 0;
      q_start.push_back(q_start.back() + q_len);
      kv_start.push_back(kv_start.back() + kv_len);
    }
    q = kernels::reference::RandomVector(size_t(q_start.back()) * q_stride, seed + 1);
    k = kernels::reference::RandomVector(size_t(kv_start.back()) * kv_stride, seed + 2);
    v = kernels::reference::RandomVector(size_t(kv_start.back()) * kv_stride, seed + 3);
    out.assign(size_t(q_start.back()) * num_heads * c.head_dim, NAN);
  }

  int max_q_len() const {
    int m = 0;
    for (int s = 0; s < c.batch; ++s) m = std::max(m, q_start[s + 1] - q_start[s]);
    return m;
  }
  PrefillAttentionParams Params(float* out_ptr) const {
    return {.out = out_ptr,
            .q = q.data(),
            .k = k.data(),
            .v = v.data(),
            .q_start = q_start.data(),
            .kv_start = kv_start.data(),
            .num_seqs = c.batch,
            .num_heads = num_heads,
            .num_kv_heads = c.num_kv_heads,
            .head_dim = c.head_dim,
            .q_stride = q_stride,
            .kv_stride = kv_stride,
            .scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
            .max_q_len = max_q_len()};
  }
  std::vector<float> Reference() const {
    std::vector<float> expected(out.size());
    reference::PrefillAttention(Params(expected.data()));
    return expected;
  }
};

// (a) the fast CPU kernel vs the textbook reference.
class PrefillAttentionCpuTest : public ::testing::TestWithParam<PrefillCase> {};

TEST_P(PrefillAttentionCpuTest, MatchesReference) {
  PrefillProblem problem(GetParam(), 500 + GetParam().max_kv_len);
  ThreadPool pool(2);
  ASSERT_THAT(PrefillAttentionCpu(problem.Params(problem.out.data()), &pool), IsOk());
  EXPECT_TRUE(AllFinite(problem.out));
  EXPECT_TRUE(AllClose(problem.out, problem.Reference(), ToleranceFor(DType::kF32)));
}

std::vector<PrefillCase> CpuCases() {
  std::vector<PrefillCase> cases;
  for (int batch : {1, 3, 12}) {
    for (int kv_len : {1, 54, 97, 256}) {
      for (int group : {1, 4, 8}) cases.push_back({batch, kv_len, group});
    }
  }
  cases.push_back({1, 1000, 4, 64, 1});  // one long prompt
  cases.push_back({3, 70, 2, 80});       // head_dim not a multiple of 16
  cases.push_back({2, 33, 1, 128});
  cases.push_back({2, 20, 2, 7});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Sweep, PrefillAttentionCpuTest, ::testing::ValuesIn(CpuCases()),
                         [](const auto& info) { return CaseName(info.param); });

// (c) invariants.
TEST(PrefillAttentionCpuTest, BatchedEqualsPerSequence) {
  PrefillProblem problem({12, 150, 4}, 3);
  ThreadPool pool(2);
  ASSERT_THAT(PrefillAttentionCpu(problem.Params(problem.out.data()), &pool), IsOk());
  const int row = problem.num_heads * problem.c.head_dim;
  for (int s = 0; s < problem.c.batch; ++s) {
    const int q_len = problem.q_start[s + 1] - problem.q_start[s];
    const int kv_len = problem.kv_start[s + 1] - problem.kv_start[s];
    if (q_len == 0) continue;  // nothing to compare (and no output buffer to pass)
    const std::vector<int32_t> q_start = {0, q_len};
    const std::vector<int32_t> kv_start = {0, kv_len};
    std::vector<float> single(size_t(q_len) * row);
    PrefillAttentionParams p = problem.Params(single.data());
    p.num_seqs = 1;
    p.q += size_t(problem.q_start[s]) * problem.q_stride;
    p.k += size_t(problem.kv_start[s]) * problem.kv_stride;
    p.v += size_t(problem.kv_start[s]) * problem.kv_stride;
    p.q_start = q_start.data();
    p.kv_start = kv_start.data();
    ASSERT_THAT(PrefillAttentionCpu(p, nullptr), IsOk());
    for (int i = 0; i < q_len * row; ++i) {
      ASSERT_EQ(single[i], problem.out[size_t(problem.q_start[s]) * row + i])
          << "sequence " << s << " element " << i;
    }
  }
}

// Chunked prefill: the last queries of a prompt, attending to the whole prompt's K/V, give the
// same rows as the full prefill.
TEST(PrefillAttentionCpuTest, ChunkMatchesTheTailOfTheFullPrompt) {
  PrefillProblem full({1, 211, 4}, 8);
  ASSERT_THAT(PrefillAttentionCpu(full.Params(full.out.data()), nullptr), IsOk());
  const int row = full.num_heads * full.c.head_dim;
  for (int chunk : {1, 17, 100}) {
    const std::vector<int32_t> q_start = {0, chunk};
    std::vector<float> out(size_t(chunk) * row);
    PrefillAttentionParams p = full.Params(out.data());
    p.q += size_t(211 - chunk) * full.q_stride;
    p.q_start = q_start.data();
    ASSERT_THAT(PrefillAttentionCpu(p, nullptr), IsOk());
    const std::vector<float> tail(full.out.end() - out.size(), full.out.end());
    EXPECT_TRUE(AllClose(out, tail, ToleranceFor(DType::kF32))) << "chunk " << chunk;
  }
}

TEST(PrefillAttentionCpuTest, LargeScoresStayFinite) {
  PrefillProblem problem({3, 130, 4}, 21);
  for (float& x : problem.q) x *= 300.0f;
  ASSERT_THAT(PrefillAttentionCpu(problem.Params(problem.out.data()), nullptr), IsOk());
  EXPECT_TRUE(AllFinite(problem.out));
  EXPECT_TRUE(AllClose(problem.out, problem.Reference(), {.atol = 1e-4, .rtol = 1e-4}));
}

TEST(PrefillAttentionCpuTest, RejectsBadOffsetsAndShapes) {
  PrefillProblem problem({3, 30, 2}, 4);
  std::vector<int32_t> q_start = problem.q_start;
  PrefillAttentionParams p = problem.Params(problem.out.data());
  q_start[1] = problem.kv_start[1] + 1;  // q_len > kv_len for sequence 0
  p.q_start = q_start.data();
  EXPECT_THAT(PrefillAttentionCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sequence 0")));
  p = problem.Params(problem.out.data());
  p.num_kv_heads = 3;
  EXPECT_THAT(PrefillAttentionCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_kv_heads")));
  p = problem.Params(problem.out.data());
  p.kv_stride = 1;
  EXPECT_THAT(PrefillAttentionCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("kv_stride")));
}

// (b) the CUDA kernel (emulated, or on a GPU) vs the CPU twin.
using Backend = testing::KernelBackend<PrefillAttentionParams>;
class PrefillAttentionKernelTest
    : public ::testing::TestWithParam<std::tuple<Backend, PrefillCase>> {};

TEST_P(PrefillAttentionKernelTest, MatchesCpu) {
  const auto [backend, c] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  PrefillProblem problem(c, 41);
  std::vector<float> expected(problem.out.size());
  ASSERT_THAT(PrefillAttentionCpu(problem.Params(expected.data()), nullptr), IsOk());
  ASSERT_THAT(backend.run(problem.Params(problem.out.data())), IsOk());
  EXPECT_TRUE(AllFinite(problem.out));
  EXPECT_TRUE(AllClose(problem.out, expected, ToleranceFor(DType::kF32)));
}

TEST(PrefillAttentionKernelTest, EmulatedLauncherNeedsMaxQLen) {
  PrefillProblem problem({1, 5, 1}, 2);
  PrefillAttentionParams p = problem.Params(problem.out.data());
  p.max_q_len = 0;
  EXPECT_THAT(PrefillAttentionEmulated(p),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_q_len")));
}

std::string KernelTestName(
    const ::testing::TestParamInfo<std::tuple<Backend, PrefillCase>>& info) {
  return absl::StrCat(std::get<0>(info.param).name, "_", CaseName(std::get<1>(info.param)));
}

// (c) the tensor-core kernel (allow_bf16_tensor_cores, head_dim 64 and 128). With q, k and v
// already bf16 values its only rounding is the probabilities', so it must match the f32 CPU kernel
// on those inputs within bf16's tolerance; on raw inputs it must differ from f32 somewhere (the
// launch took the tensor-core path) and still lie within that tolerance.
class PrefillAttentionTensorCoreTest
    : public ::testing::TestWithParam<std::tuple<Backend, PrefillCase>> {};

void RoundToBf16(std::vector<float>& values) {
  for (float& x : values) x = Bf16ToF32(F32ToBf16(x));
}

TEST_P(PrefillAttentionTensorCoreTest, MatchesCpuOnBf16Inputs) {
  const auto [backend, c] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  PrefillProblem problem(c, 43);
  RoundToBf16(problem.q);
  RoundToBf16(problem.k);
  RoundToBf16(problem.v);
  std::vector<float> expected(problem.out.size());
  ASSERT_THAT(PrefillAttentionCpu(problem.Params(expected.data()), nullptr), IsOk());
  PrefillAttentionParams p = problem.Params(problem.out.data());
  p.allow_bf16_tensor_cores = true;
  ASSERT_THAT(backend.run(p), IsOk());
  EXPECT_TRUE(AllFinite(problem.out));
  EXPECT_TRUE(AllClose(problem.out, expected, ToleranceFor(DType::kBF16)));
}

TEST_P(PrefillAttentionTensorCoreTest, RoundsRawInputsWithinBf16Tolerance) {
  const auto [backend, c] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  PrefillProblem problem(c, 44);
  std::vector<float> expected(problem.out.size());
  ASSERT_THAT(PrefillAttentionCpu(problem.Params(expected.data()), nullptr), IsOk());
  PrefillAttentionParams p = problem.Params(problem.out.data());
  p.allow_bf16_tensor_cores = true;
  ASSERT_THAT(backend.run(p), IsOk());
  EXPECT_TRUE(AllClose(problem.out, expected, ToleranceFor(DType::kBF16)));
  EXPECT_FALSE(AllClose(problem.out, expected, {.atol = 0, .rtol = 0}))
      << "bit-equal to the f32 kernel: the launch did not take the tensor-core path";
}

// head_dim 80 has no tensor-core kernel: the f32 one runs, to f32's tolerance.
TEST(PrefillAttentionTensorCoreTest, OtherHeadDimsKeepTheF32Kernel) {
  PrefillProblem problem({3, 20, 4, 80}, 45);
  std::vector<float> expected(problem.out.size());
  ASSERT_THAT(PrefillAttentionCpu(problem.Params(expected.data()), nullptr), IsOk());
  PrefillAttentionParams p = problem.Params(problem.out.data());
  p.allow_bf16_tensor_cores = true;
  ASSERT_THAT(PrefillAttentionEmulated(p), IsOk());
  EXPECT_TRUE(AllClose(problem.out, expected, ToleranceFor(DType::kF32)));
}

// Cases: one query; GQA with a partial query tile; several 64-query tiles and 32-key tiles with
// chunks (q_len < kv_len) and an empty sequence; head_dim 128 with one kv head.
INSTANTIATE_TEST_SUITE_P(
    Emulated, PrefillAttentionTensorCoreTest,
    ::testing::Combine(::testing::Values(Backend{"emulated", &PrefillAttentionEmulated,
                                                 &testing::AlwaysAvailable}),
                       ::testing::Values(PrefillCase{1, 1, 1}, PrefillCase{1, 37, 4},
                                         PrefillCase{3, 150, 2}, PrefillCase{2, 70, 2, 128, 1})),
    KernelTestName);
#if BATON_HAS_CUDA
INSTANTIATE_TEST_SUITE_P(
    Cuda, PrefillAttentionTensorCoreTest,
    ::testing::Combine(::testing::Values(Backend{"cuda", &testing::PrefillAttentionOnDevice,
                                                 &testing::CudaDeviceAvailable}),
                       ::testing::Values(PrefillCase{1, 1, 1}, PrefillCase{3, 256, 4},
                                         PrefillCase{12, 97, 8, 128}, PrefillCase{1, 1000, 4, 128},
                                         PrefillCase{4, 700, 8})),
    KernelTestName);
#endif

INSTANTIATE_TEST_SUITE_P(
    Emulated, PrefillAttentionKernelTest,
    ::testing::Combine(::testing::Values(Backend{"emulated", &PrefillAttentionEmulated,
                                                 &testing::AlwaysAvailable}),
                       ::testing::Values(PrefillCase{1, 1, 1}, PrefillCase{1, 37, 4},
                                         PrefillCase{3, 54, 1}, PrefillCase{3, 20, 4, 80},
                                         PrefillCase{2, 19, 1, 256, 1})),
    KernelTestName);
#if BATON_HAS_CUDA
INSTANTIATE_TEST_SUITE_P(
    Cuda, PrefillAttentionKernelTest,
    ::testing::Combine(::testing::Values(Backend{"cuda", &testing::PrefillAttentionOnDevice,
                                                 &testing::CudaDeviceAvailable}),
                       ::testing::Values(PrefillCase{1, 1, 1}, PrefillCase{3, 256, 4},
                                         PrefillCase{12, 97, 8}, PrefillCase{1, 1000, 4},
                                         PrefillCase{3, 70, 2, 80})),
    KernelTestName);
#endif

}  // namespace
}  // namespace baton::kernels
