#include "baton/kernels/matmul.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/matmul_internal.h"
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
using testing::ScaledForSum;
using testing::ToleranceFor;
using ::testing::HasSubstr;

struct MatmulProblem {
  int m;
  int n;
  int k;
  DType dtype;
  std::vector<float> in;
  std::vector<float> weight32;
  std::vector<uint16_t> weight16;
  std::vector<int8_t> weight8;  // kI8: integers in [-127, 127], each row times its scale
  std::vector<float> scales;    // kI8: [n], about 1/127, so the weights span about [-1, 1]
  std::vector<float> bias;
  std::vector<float> out;

  MatmulProblem(int m_, int n_, int k_, DType dt, bool with_bias, uint64_t seed)
      : m(m_), n(n_), k(k_), dtype(dt), in(kernels::reference::RandomVector(size_t(m_) * k_, seed)),
        out(size_t(m_) * n_, NAN) {
    if (dt == DType::kF32) {
      weight32 = kernels::reference::RandomVector(size_t(n_) * k_, seed + 1);
    } else if (dt == DType::kBF16) {
      weight16 = kernels::reference::RandomBf16(size_t(n_) * k_, seed + 1);
    } else if (dt == DType::kI8) {
      kernels::reference::TestRng rng(seed + 1);
      weight8.resize(size_t(n_) * k_);
      for (int8_t& q : weight8) q = static_cast<int8_t>(rng.UniformInt(-127, 127));
      scales = kernels::reference::RandomVector(n_, seed + 3, 0.5f / 127, 1.5f / 127);
    } else {
      weight16 = kernels::reference::RandomF16(size_t(n_) * k_, seed + 1);
    }
    if (with_bias) bias = kernels::reference::RandomVector(n_, seed + 2);
  }
  MatmulParams Params(float* out_ptr, const float* in_ptr = nullptr) const {
    return {.out = out_ptr,
            .in = in_ptr != nullptr ? in_ptr : in.data(),
            .weight = dtype == DType::kF32   ? static_cast<const void*>(weight32.data())
                      : dtype == DType::kI8 ? static_cast<const void*>(weight8.data())
                                            : static_cast<const void*>(weight16.data()),
            .weight_dtype = dtype,
            .bias = bias.empty() ? nullptr : bias.data(),
            .m = m,
            .n = n,
            .k = k,
            .weight_scales = scales.empty() ? nullptr : scales.data()};
  }
};

// Terms are products of two uniform[-1, 1] values (mean |x*w| = 1/4); f32 sums of k of them.
testing::Tolerance SumTolerance(int k) { return ScaledForSum(ToleranceFor(DType::kF32), k, 0.25); }

// The activations as the spec multiplies them: rounded to the weights' dtype when it is 16-bit.
std::vector<float> RoundedLikeTheWeights(const std::vector<float>& in, DType dtype) {
  switch (dtype) {
    case DType::kF32: return in;
    case DType::kBF16:
    case DType::kI8:
    case DType::kI4:
    case DType::kF8E4M3: return kernels::reference::RoundToBf16(in);
    case DType::kF16: return kernels::reference::RoundToF16(in);
  }
  return in;
}

// One instance per (dtype, m): m picks the kernel (f32: weight streaming in row groups of 8 on
// AVX-512, 4 on AVX2, up to 16 rows, sgemm above; bf16 with AVX512_BF16: streaming up to 4 rows,
// micro-tiles above; bf16 without, and f16: streaming up to 16 rows, widened panels into sgemm
// above); the inner loops sweep odd n and k (vector tails), bias and threading.
class MatmulCpuTest : public ::testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(MatmulCpuTest, MatchesReference) {
  const auto [dtype, m] = GetParam();
  ThreadPool pool(2);
  for (int n : {1, 7, 33, 256}) {
    for (int k : {1, 15, 50, 64, 300, 1029}) {  // 1029: the long-row GEMV paths
      for (bool with_bias : {false, true}) {
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
          SCOPED_TRACE(::testing::Message() << "n " << n << " k " << k << " bias " << with_bias
                                          << " pool " << (p != nullptr));
          MatmulProblem problem(m, n, k, dtype, with_bias, 100 + m + n + k);
          ASSERT_THAT(MatmulCpu(problem.Params(problem.out.data()), p), IsOk());
          // The spec for 16-bit weights rounds the activations to their dtype, then computes in f32.
          const std::vector<float> in = RoundedLikeTheWeights(problem.in, dtype);
          std::vector<float> expected(problem.out.size());
          reference::Matmul(problem.Params(expected.data(), in.data()));
          EXPECT_TRUE(AllClose(problem.out, expected, SumTolerance(k)));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatmulCpuTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16,
                                                              DType::kF16, DType::kI8),
                                            ::testing::Values(1, 2, 3, 4, 5, 8, 15, 16, 17, 64)));

TEST(MatmulCpuTest, Bf16ResultIsCloseToTheUnroundedProduct) {
  MatmulProblem problem(9, 70, 768, DType::kBF16, true, 5);
  ASSERT_THAT(MatmulCpu(problem.Params(problem.out.data()), nullptr), IsOk());
  std::vector<float> exact(problem.out.size());
  reference::Matmul(problem.Params(exact.data()));
  // Rounding an activation to bf16 is a relative error uniform in about [-2^-9, 2^-9] (standard
  // deviation 2^-9 / sqrt(3)); over k terms of RMS size 1/3 the sum moves by
  // 2^-9 / sqrt(3) * sqrt(k) / 3 = 0.0104 (one standard deviation). Allow six.
  EXPECT_TRUE(AllClose(problem.out, exact, {.atol = 6 * 0.0104, .rtol = 0}));
}

TEST(MatmulCpuTest, F16ResultIsCloseToTheUnroundedProduct) {
  MatmulProblem problem(9, 70, 768, DType::kF16, true, 5);
  ASSERT_THAT(MatmulCpu(problem.Params(problem.out.data()), nullptr), IsOk());
  std::vector<float> exact(problem.out.size());
  reference::Matmul(problem.Params(exact.data()));
  // As for bf16 with f16's 11-bit significand: a relative error within 2^-11, so one standard
  // deviation of the sum is 2^-11 / sqrt(3) * sqrt(k) / 3 = 0.0026. Allow six.
  EXPECT_TRUE(AllClose(problem.out, exact, {.atol = 6 * 0.0026, .rtol = 0}));
}

// The activations are rounded to f16 correctly on every path (the F16C GEMV at m = 1, the widened
// panels at m = 40, the portable twin): against identity weights the output is the rounded
// activations themselves, bit for bit. The values are the hard cases: ties to even both ways, f16
// subnormals, half the smallest subnormal and less (to 0), and just under the overflow threshold.
TEST(MatmulCpuTest, F16ActivationsAreRoundedToNearestEvenOnEveryPath) {
  const std::vector<float> hard = {1.0f + 0x1p-11f,        // tie: down to 1
                                   1.0f + 3 * 0x1p-11f,    // tie: up to 1 + 2^-9
                                   -(2.0f + 0x1p-10f),     // tie at a larger binade: down
                                   1.0f + 0x1p-11f + 0x1p-20f,  // just above a tie: up
                                   0x1p-20f, -3.3e-6f, 0x1p-24f, 0x1p-25f, 0x1p-26f,
                                   65519.0f, -65504.0f, 0.1f, 1.0f / 3.0f, 0.0f};
  constexpr int kK = 37;  // two 16-lane vectors and a tail
  std::vector<uint16_t> identity(kK * kK, F32ToF16(0.0f));
  for (int j = 0; j < kK; ++j) identity[j * kK + j] = F32ToF16(1.0f);
  for (int m : {1, 40}) {
    std::vector<float> in(size_t(m) * kK);
    // Every third value scaled by 2^-3: the same hard cases in another binade.
    for (size_t i = 0; i < in.size(); ++i) {
      in[i] = hard[i % hard.size()] * (i % 3 == 2 ? 0x1p-3f : 1.0f);
    }
    const std::vector<float> expected = kernels::reference::RoundToF16(in);
    std::vector<float> fast(in.size(), NAN), portable(in.size(), NAN);
    MatmulParams p{.out = fast.data(), .in = in.data(), .weight = identity.data(),
                   .weight_dtype = DType::kF16, .bias = nullptr, .m = m, .n = kK, .k = kK};
    ASSERT_THAT(MatmulCpu(p, nullptr), IsOk());
    p.out = portable.data();
    internal::MatmulF16Portable(absl::MakeConstSpan(&p, 1), nullptr);
    for (size_t i = 0; i < in.size(); ++i) {
      EXPECT_EQ(fast[i], expected[i]) << "m " << m << " element " << i << " (" << in[i] << ")";
      EXPECT_EQ(portable[i], expected[i]) << "m " << m << " element " << i << " (" << in[i] << ")";
    }
  }
}

// An activation beyond f16's range is infinite once rounded, as in a GPU f16 GEMM: the product
// overflows rather than being quietly exact.
TEST(MatmulCpuTest, F16ActivationsBeyondTheRangeBecomeInfinite) {
  constexpr int kK = 20;
  std::vector<float> in(kK, 1.0f);
  in[3] = 65520.0f;  // halfway between 65504 and the next step (65536): rounds to +inf
  const std::vector<uint16_t> ones(kK, F32ToF16(1.0f));
  float out = 0;
  ASSERT_THAT(MatmulCpu({.out = &out, .in = in.data(), .weight = ones.data(),
                         .weight_dtype = DType::kF16, .bias = nullptr, .m = 1, .n = 1, .k = kK},
                        nullptr),
              IsOk());
  EXPECT_EQ(out, INFINITY);
}

TEST(MatmulCpuTest, PortableF16PathMatchesTheFastOne) {
  for (int m : {1, 6, 40}) {
    for (int k : {100, 1029}) {
      MatmulProblem problem(m, 45, k, DType::kF16, true, 8);
      std::vector<float> portable(problem.out.size());
      ThreadPool pool(2);
      ASSERT_THAT(MatmulCpu(problem.Params(problem.out.data()), &pool), IsOk());
      const MatmulParams params = problem.Params(portable.data());
      internal::MatmulF16Portable(absl::MakeConstSpan(&params, 1), &pool);
      EXPECT_TRUE(AllClose(portable, problem.out, SumTolerance(k))) << "m = " << m << " k = " << k;
    }
  }
}

TEST(MatmulCpuTest, PortableInt8PathMatchesTheFastOne) {
  for (int m : {1, 6, 40}) {
    MatmulProblem problem(m, 45, 100, DType::kI8, true, 8);
    std::vector<float> portable(problem.out.size());
    ThreadPool pool(2);
    ASSERT_THAT(MatmulCpu(problem.Params(problem.out.data()), &pool), IsOk());
    const MatmulParams params = problem.Params(portable.data());
    internal::MatmulInt8Portable(absl::MakeConstSpan(&params, 1), &pool);
    EXPECT_TRUE(AllClose(portable, problem.out, SumTolerance(100))) << "m = " << m;
  }
}

// int8 x bf16 products are exact in f32, so the int8 result of (in, q, scale) is the f32 result
// of (bf16(in), q) times the scale: equal up to summation order at any size.
TEST(MatmulCpuTest, Int8IsTheF32ProductOfTheIntegersTimesTheScale) {
  for (int m : {1, 7, 33}) {
    MatmulProblem problem(m, 50, 300, DType::kI8, false, 21);
    ASSERT_THAT(MatmulCpu(problem.Params(problem.out.data()), nullptr), IsOk());
    const std::vector<float> in = kernels::reference::RoundToBf16(problem.in);
    const std::vector<float> integers(problem.weight8.begin(), problem.weight8.end());
    std::vector<float> expected(problem.out.size());
    ASSERT_THAT(MatmulCpu({.out = expected.data(), .in = in.data(), .weight = integers.data(),
                           .weight_dtype = DType::kF32, .bias = nullptr, .m = m, .n = 50, .k = 300},
                          nullptr),
                IsOk());
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < 50; ++j) expected[i * 50 + j] *= problem.scales[j];
    }
    EXPECT_TRUE(AllClose(problem.out, expected, ToleranceFor(DType::kF32))) << "m = " << m;
  }
}

TEST(MatmulCpuTest, PortableBf16PathMatchesTheFastOne) {
  for (int m : {1, 6, 40}) {
    MatmulProblem problem(m, 45, 100, DType::kBF16, true, 8);
    std::vector<float> portable(problem.out.size());
    ThreadPool pool(2);
    ASSERT_THAT(MatmulCpu(problem.Params(problem.out.data()), &pool), IsOk());
    const MatmulParams params = problem.Params(portable.data());
    internal::MatmulBf16Portable(absl::MakeConstSpan(&params, 1), &pool);
    EXPECT_TRUE(AllClose(portable, problem.out, SumTolerance(100))) << "m = " << m;
  }
}

// (c) a row of the output depends on its row of the input only: m rows at once equals m calls of
// one row, up to summation order (GEMV and GEMM kernels differ).
TEST(MatmulCpuTest, BatchedRowsMatchSingleRows) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kI8}) {
    MatmulProblem problem(37, 130, 257, dtype, true, 12);
    ThreadPool pool(2);
    ASSERT_THAT(MatmulCpu(problem.Params(problem.out.data()), &pool), IsOk());
    std::vector<float> row(130);
    for (int i = 0; i < 37; ++i) {
      MatmulParams p = problem.Params(row.data(), problem.in.data() + i * 257);
      p.m = 1;
      ASSERT_THAT(MatmulCpu(p, &pool), IsOk());
      const std::vector<float> batched(problem.out.begin() + i * 130,
                                       problem.out.begin() + (i + 1) * 130);
      EXPECT_TRUE(AllClose(row, batched, SumTolerance(257))) << "row " << i;
    }
  }
}

// A group computes exactly what its members compute alone: the same kernels on the same rows,
// only the split of the rows over the threads differs.
TEST(MatmulGroupCpuTest, EqualsEachMemberAlone) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kI8}) {
    for (int m : {1, 3, 9}) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " m " << m);
      // Odd widths so the group's row ranges cut members mid-way; one member with a bias.
      const std::vector<int> widths = {37, 1, 300};
      const std::vector<float> in = kernels::reference::RandomVector(size_t(m) * 65, 3);
      std::vector<MatmulProblem> members;
      for (size_t i = 0; i < widths.size(); ++i) {
        members.emplace_back(m, widths[i], 65, dtype, i == 2, 40 + i);
      }
      ThreadPool pool(2);
      std::vector<MatmulParams> group;
      std::vector<std::vector<float>> alone(members.size());
      for (size_t i = 0; i < members.size(); ++i) {
        group.push_back(members[i].Params(members[i].out.data(), in.data()));
        alone[i].resize(members[i].out.size());
        ASSERT_THAT(MatmulCpu(members[i].Params(alone[i].data(), in.data()), &pool), IsOk());
      }
      ASSERT_THAT(MatmulGroupCpu(group, &pool), IsOk());
      for (size_t i = 0; i < members.size(); ++i) EXPECT_EQ(members[i].out, alone[i]) << "member " << i;
    }
  }
}

// In the decode regime (m <= 16) an f32 row's result must not depend on how many other rows share
// the batch: every row-group size sums a row in the same order, so decoding a sequence alone or
// among others gives bit-identical logits. (bf16 makes no such promise: AVX512_BF16 switches from
// streaming rows to register tiles above m = 4.)
TEST(MatmulCpuTest, F32DecodeRowsDoNotDependOnTheBatchSize) {
  // Odd sizes: a partial 4-row block, an 8-lane chunk and a tail; k = 1029 also takes the AVX2
  // four-weight-rows path for a lone row.
  constexpr int kN = 37;
  ThreadPool pool(2);
  for (int k : {77, 1029}) {
    // Every m the GEMV takes in this build (sgemm above it promises nothing).
    const int max_m = internal::F32GemvMaxRows();
    const MatmulProblem batch(max_m, kN, k, DType::kF32, /*with_bias=*/true, 7);
    for (int m = 1; m <= max_m; ++m) {
      SCOPED_TRACE(::testing::Message() << "k " << k << " m " << m);
      MatmulProblem p = batch;
      p.m = m;
      p.out.assign(size_t(m) * kN, NAN);
      ASSERT_THAT(MatmulCpu(p.Params(p.out.data()), &pool), IsOk());
      for (int r = 0; r < m; ++r) {
        MatmulProblem alone = batch;
        alone.m = 1;
        alone.out.assign(kN, NAN);
        ASSERT_THAT(MatmulCpu(alone.Params(alone.out.data(), batch.in.data() + size_t(r) * k), &pool),
                    IsOk());
        const std::vector<float> row(p.out.begin() + r * kN, p.out.begin() + (r + 1) * kN);
        EXPECT_EQ(row, alone.out) << "row " << r;
      }
    }
  }
}

TEST(MatmulGroupCpuTest, RejectsMembersThatDoNotShareTheInput) {
  MatmulProblem a(2, 3, 4, DType::kF32, false, 1);
  MatmulProblem b(2, 5, 4, DType::kF32, false, 2);
  const std::vector<MatmulParams> group = {a.Params(a.out.data()), b.Params(b.out.data())};
  EXPECT_THAT(MatmulGroupCpu(group, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("share in")));
  std::vector<MatmulParams> bad = {a.Params(a.out.data()), b.Params(b.out.data(), a.in.data())};
  bad[1].k = 0;
  EXPECT_THAT(MatmulGroupCpu(bad, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("k")));
  EXPECT_THAT(MatmulGroupCpu({}, nullptr), IsOk());
}

TEST(MatmulCpuTest, RejectsBadParams) {
  MatmulProblem problem(2, 3, 4, DType::kF32, false, 1);
  MatmulParams p = problem.Params(problem.out.data());
  p.weight_dtype = static_cast<DType>(7);  // no such dtype
  EXPECT_THAT(MatmulCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("weight_dtype ? is not supported")));
  p = problem.Params(problem.out.data());
  p.k = 0;
  EXPECT_THAT(MatmulCpu(p, nullptr), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("k")));
  p = problem.Params(nullptr);
  p.m = 0;
  EXPECT_THAT(MatmulCpu(p, nullptr), IsOk());
  // Scales go with int8 weights, and only with them.
  const float scales[3] = {1, 1, 1};
  p = problem.Params(problem.out.data());
  p.weight_scales = scales;
  EXPECT_THAT(MatmulCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("weight_scales given with f32")));
  MatmulProblem int8(2, 3, 4, DType::kI8, false, 1);
  p = int8.Params(int8.out.data());
  p.weight_scales = nullptr;
  EXPECT_THAT(MatmulCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("weight_scales")));
}

// ---- (b) the device's int8 GEMV for decode batches (emulated, or on a GPU) against the CPU ----

using GemvBackend = testing::KernelBackend<MatmulParams>;
class MatmulInt8GemvKernelTest : public ::testing::TestWithParam<GemvBackend> {};

TEST_P(MatmulInt8GemvKernelTest, MatchesTheCpuUpToSummationOrder) {
  const GemvBackend backend = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  for (int m : {1, 2, 5, kMatmulInt8GemvMaxRows}) {
    for (const auto& [n, k] : {std::pair{1, 1}, std::pair{33, 70}, std::pair{100, 129},
                               std::pair{17, 1029}}) {
      for (bool with_bias : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "m " << m << " n " << n << " k " << k << " bias "
                                          << with_bias);
        MatmulProblem problem(m, n, k, DType::kI8, with_bias, 500 + m + n + k);
        std::vector<float> expected(problem.out.size());
        ASSERT_THAT(MatmulCpu(problem.Params(expected.data()), nullptr), IsOk());
        ASSERT_THAT(backend.run(problem.Params(problem.out.data())), IsOk());
        EXPECT_TRUE(AllClose(problem.out, expected, SumTolerance(k)));
      }
    }
  }
}

TEST(MatmulInt8GemvTest, TakesInt8WeightsAndDecodeBatchesOnly) {
  MatmulProblem batch(kMatmulInt8GemvMaxRows + 1, 3, 4, DType::kI8, false, 1);
  EXPECT_THAT(MatmulInt8GemvEmulated(batch.Params(batch.out.data())),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("m 9 > 8")));
  MatmulProblem f32(2, 3, 4, DType::kF32, false, 1);
  EXPECT_THAT(MatmulInt8GemvEmulated(f32.Params(f32.out.data())),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not i8")));
}

std::string GemvTestName(const ::testing::TestParamInfo<GemvBackend>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Emulated, MatmulInt8GemvKernelTest,
                         ::testing::Values(GemvBackend{"emulated", &MatmulInt8GemvEmulated,
                                                       &testing::AlwaysAvailable}),
                         GemvTestName);
#if BATON_HAS_CUDA
INSTANTIATE_TEST_SUITE_P(Cuda, MatmulInt8GemvKernelTest,
                         ::testing::Values(GemvBackend{"cuda", &testing::MatmulInt8GemvOnDevice,
                                                       &testing::CudaDeviceAvailable}),
                         GemvTestName);
#endif

}  // namespace
}  // namespace baton::kernels
