// MatmulCpu with int4 weights (W4A16, groups of columns): the packing order, the GEMV and panel
// paths against the reference, the portable twin against the fast one, and the params' checks.
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "baton/kernels/matmul.h"
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

struct Int4Problem {
  int m, n, k, group_size;
  std::vector<float> in;
  std::vector<uint8_t> packed;  // [n, k / 2]
  std::vector<float> scales;    // [n, k / group_size]
  std::vector<float> zeros;     // empty: symmetric (8)
  std::vector<float> bias;
  std::vector<float> out;

  Int4Problem(int m_, int n_, int k_, int group, bool with_zeros, bool with_bias, uint64_t seed)
      : m(m_), n(n_), k(k_), group_size(group),
        in(reference::RandomVector(size_t(m_) * k_, seed)), out(size_t(m_) * n_, NAN) {
    reference::TestRng rng(seed + 1);
    packed.resize(size_t(n_) * k_ / 2);
    for (uint8_t& byte : packed) byte = static_cast<uint8_t>(rng.UniformInt(0, 255));
    const size_t groups = size_t(n_) * (k_ / group);
    // Weights of about [-1, 1]: (u - zero) spans about 15 steps of 1/8.
    scales = reference::RandomVector(groups, seed + 2, 0.5f / 8, 1.5f / 8);
    if (with_zeros) {
      zeros.resize(groups);
      for (float& z : zeros) z = static_cast<float>(rng.UniformInt(0, 15));
    }
    if (with_bias) bias = reference::RandomVector(n_, seed + 3);
  }
  MatmulParams Params(float* out_ptr, const float* in_ptr = nullptr) const {
    return {.out = out_ptr,
            .in = in_ptr != nullptr ? in_ptr : in.data(),
            .weight = packed.data(),
            .weight_dtype = DType::kI4,
            .bias = bias.empty() ? nullptr : bias.data(),
            .m = m,
            .n = n,
            .k = k,
            .weight_scales = scales.data(),
            .weight_zeros = zeros.empty() ? nullptr : zeros.data(),
            .weight_group_size = group_size};
  }
};

// Terms are products of uniform[-1, 1] activations and weights of about [-1, 1], or about [-2, 2]
// with zero points (u - zero spans up to 30 steps of up to 3/16): prefill-sized products round the
// dequantized weights to bf16, an error that grows with them.
testing::Tolerance SumTolerance(int k, bool zeros = false) {
  return ScaledForSum(ToleranceFor(DType::kI4), k, zeros ? 0.5 : 0.25);
}

// The activations as the decode GEMV takes them: int8 per row and group of `group` columns, scale
// max |x| / 127, round half to even, then dequantized (written here from the spec in matmul.h).
std::vector<float> Int8PerGroup(const std::vector<float>& in, int k, int group) {
  std::vector<float> out(in.size());
  for (size_t begin = 0; begin < in.size(); begin += group) {
    float max_abs = 0;
    for (int c = 0; c < group; ++c) max_abs = std::max(max_abs, std::fabs(in[begin + c]));
    const float scale = max_abs > 0 ? max_abs / 127 : 1.0f;
    for (int c = 0; c < group; ++c) out[begin + c] = std::nearbyint(in[begin + c] / scale) * scale;
  }
  (void)k;
  return out;
}

// The spec: up to 16 rows, int8 activations per group; above, activations rounded to bf16; then the
// dequantized weights' product (reference::Matmul).
std::vector<float> Expected(const Int4Problem& problem) {
  const std::vector<float> in = problem.m <= 16
                                    ? Int8PerGroup(problem.in, problem.k, problem.group_size)
                                    : reference::RoundToBf16(problem.in);
  std::vector<float> expected(problem.out.size());
  reference::Matmul(problem.Params(expected.data(), in.data()));
  return expected;
}

// m picks the path: the GEMV (row tiles of 4 and the rest) up to 16 rows, dequantized panels above.
TEST(MatmulInt4Test, MatchesReference) {
  ThreadPool pool(2);
  for (int m : {1, 2, 3, 4, 5, 8, 16, 17, 40}) {
    for (int n : {1, 7, 33}) {
      for (auto [k, group] : {std::pair{32, 32}, {128, 32}, {256, 128}, {384, 128}, {640, 64}}) {
        for (bool zeros : {false, true}) {
          for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
            SCOPED_TRACE(::testing::Message() << "m " << m << " n " << n << " k " << k << " group "
                                            << group << " zeros " << zeros);
            Int4Problem problem(m, n, k, group, zeros, /*with_bias=*/n == 7, 100 + m + n + k);
            ASSERT_THAT(MatmulCpu(problem.Params(problem.out.data()), p), IsOk());
            EXPECT_TRUE(AllClose(problem.out, Expected(problem), SumTolerance(k, zeros)));
          }
        }
      }
    }
  }
}

// Byte b of a 32-column run holds column b (low nibble) and column b + 16 (high nibble): a one-hot
// activation row reads back each column's nibble, on the GEMV, the panels and the portable path.
TEST(MatmulInt4Test, NibblesAreInLlamaCppsQ40Order) {
  constexpr int kK = 64;
  std::vector<uint8_t> packed(kK / 2);
  std::vector<int> nibble(kK);
  for (int run = 0; run < kK / 32; ++run) {
    for (int b = 0; b < 16; ++b) {
      const int low = (b + run) % 16;
      const int high = 15 - b;
      packed[run * 16 + b] = static_cast<uint8_t>(low | (high << 4));
      nibble[run * 32 + b] = low;
      nibble[run * 32 + b + 16] = high;
    }
  }
  const std::vector<float> scales = {1.0f, 2.0f};  // groups of 32: the second run doubled
  const std::vector<float> zeros = {0.0f, 0.0f};
  for (int m : {1, 5, 20}) {
    std::vector<float> in(size_t(m) * kK, 0.0f);
    for (int i = 0; i < m; ++i) in[size_t(i) * kK + (i * 7) % kK] = 1.0f;
    std::vector<float> out(m);
    const MatmulParams params{.out = out.data(), .in = in.data(), .weight = packed.data(),
                              .weight_dtype = DType::kI4, .bias = nullptr, .m = m, .n = 1,
                              .k = kK, .weight_scales = scales.data(),
                              .weight_zeros = zeros.data(), .weight_group_size = 32};
    for (bool portable : {false, true}) {
      if (portable) {
        internal::MatmulInt4Portable(absl::MakeConstSpan(&params, 1), nullptr);
      } else {
        ASSERT_THAT(MatmulCpu(params, nullptr), IsOk());
      }
      for (int i = 0; i < m; ++i) {
        const int c = (i * 7) % kK;
        EXPECT_EQ(out[i], nibble[c] * scales[c / 32]) << "m " << m << " column " << c;
      }
    }
  }
}

TEST(MatmulInt4Test, PortablePathMatchesTheFastOne) {
  for (int m : {1, 6, 40}) {
    for (bool zeros : {false, true}) {
      Int4Problem problem(m, 45, 256, 64, zeros, true, 8);
      std::vector<float> portable(problem.out.size());
      ThreadPool pool(2);
      ASSERT_THAT(MatmulCpu(problem.Params(problem.out.data()), &pool), IsOk());
      const MatmulParams params = problem.Params(portable.data());
      internal::MatmulInt4Portable(absl::MakeConstSpan(&params, 1), &pool);
      EXPECT_TRUE(AllClose(portable, problem.out, SumTolerance(256, zeros))) << "m = " << m;
    }
  }
}

// A decode row depends on its own activations only: 13 rows at once equal 13 calls of one row, up to
// the f32 order of the per-group sums.
TEST(MatmulInt4Test, DecodeRowsDoNotDependOnTheBatch) {
  Int4Problem problem(13, 130, 256, 128, true, true, 12);
  ThreadPool pool(2);
  ASSERT_THAT(MatmulCpu(problem.Params(problem.out.data()), &pool), IsOk());
  std::vector<float> row(130);
  for (int i = 0; i < 13; ++i) {
    MatmulParams p = problem.Params(row.data(), problem.in.data() + i * 256);
    p.m = 1;
    ASSERT_THAT(MatmulCpu(p, &pool), IsOk());
    const std::vector<float> batched(problem.out.begin() + i * 130, problem.out.begin() + (i + 1) * 130);
    EXPECT_TRUE(AllClose(row, batched, ToleranceFor(DType::kF32))) << "row " << i;
  }
}

// Every instruction set the build and the CPU have sums the same int32 per group: the results agree
// up to the f32 order of the per-group sums.
TEST(MatmulInt4Test, EveryGemvIsaMatchesThePortableOne) {
  std::vector<internal::Int4GemvIsa> isas = {internal::Int4GemvIsa::kAvx2};
  if (internal::CpuHasAvx512Vnni()) isas.push_back(internal::Int4GemvIsa::kAvx512Vnni);
  for (int m : {1, 3, 6, 16}) {
    for (bool zeros : {false, true}) {
      Int4Problem problem(m, 37, 384, 128, zeros, true, 77);
      const int64_t groups = int64_t{m} * 3;
      std::vector<int8_t> q(problem.in.size());
      std::vector<float> scales(groups), sums(groups);
      internal::Int4QuantizeActivations(problem.in.data(), m, 384, 128, q.data(), scales.data(),
                                        sums.data());
      const internal::Int4Activations a{q.data(), scales.data(), sums.data()};
      std::vector<float> portable(problem.out.size());
      internal::Int4GemvColumns(problem.Params(portable.data()), a, 0, 37,
                                internal::Int4GemvIsa::kPortable);
      for (internal::Int4GemvIsa isa : isas) {
        internal::Int4GemvColumns(problem.Params(problem.out.data()), a, 0, 37, isa);
        EXPECT_TRUE(AllClose(problem.out, portable, ToleranceFor(DType::kF32)))
            << "m " << m << " zeros " << zeros << " isa " << static_cast<int>(isa);
      }
    }
  }
}

// With power-of-two scales every dequantized weight is exact in bf16, so every path (GEMV, bf16 or
// f32 panels, portable) is the reference up to f32 summation order.
TEST(MatmulInt4Test, ExactWeightsMatchTheReferenceOnEveryPath) {
  for (int m : {1, 9, 40}) {
    Int4Problem problem(m, 50, 384, 128, true, true, 31);
    for (size_t i = 0; i < problem.scales.size(); ++i) problem.scales[i] = i % 3 == 0 ? 0.125f : 0.0625f;
    for (bool portable : {false, true}) {
      const MatmulParams params = problem.Params(problem.out.data());
      if (portable) {
        internal::MatmulInt4Portable(absl::MakeConstSpan(&params, 1), nullptr);
      } else {
        ASSERT_THAT(MatmulCpu(params, nullptr), IsOk());
      }
      EXPECT_TRUE(AllClose(problem.out, Expected(problem), ToleranceFor(DType::kF32)))
          << "m " << m << " portable " << portable;
    }
  }
}

TEST(MatmulInt4Test, GroupEqualsEachMemberAlone) {
  for (int m : {1, 3, 20}) {
    const std::vector<float> in = reference::RandomVector(size_t(m) * 128, 3);
    std::vector<Int4Problem> members;
    for (int i = 0; i < 3; ++i) members.emplace_back(m, 37 + 100 * i, 128, 64, i == 1, i == 2, 40 + i);
    std::vector<MatmulParams> group;
    std::vector<std::vector<float>> alone(members.size());
    ThreadPool pool(2);
    for (size_t i = 0; i < members.size(); ++i) {
      group.push_back(members[i].Params(members[i].out.data(), in.data()));
      alone[i].resize(members[i].out.size());
      ASSERT_THAT(MatmulCpu(members[i].Params(alone[i].data(), in.data()), &pool), IsOk());
    }
    ASSERT_THAT(MatmulGroupCpu(group, &pool), IsOk());
    for (size_t i = 0; i < members.size(); ++i) EXPECT_EQ(members[i].out, alone[i]) << "member " << i;
  }
}

TEST(MatmulInt4Test, RejectsBadParams) {
  Int4Problem problem(2, 3, 64, 32, false, false, 1);
  MatmulParams p = problem.Params(problem.out.data());
  p.weight_group_size = 48;  // not a multiple of 32
  EXPECT_THAT(MatmulCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("group size 48")));
  p.weight_group_size = 0;
  EXPECT_THAT(MatmulCpu(p, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
  p = problem.Params(problem.out.data());
  p.k = 96;
  p.weight_group_size = 64;  // does not divide k
  EXPECT_THAT(MatmulCpu(p, nullptr), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("k 96")));
  p = problem.Params(problem.out.data());
  p.weight_scales = nullptr;
  EXPECT_THAT(MatmulCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("weight_scales")));
  // Zero points and group sizes belong to i4 weights only.
  const std::vector<float> f32_weight(3 * 64, 0.5f);
  const std::vector<float> zeros(3, 8.0f);
  MatmulParams f32{.out = problem.out.data(), .in = problem.in.data(), .weight = f32_weight.data(),
                   .weight_dtype = DType::kF32, .bias = nullptr, .m = 2, .n = 3, .k = 64,
                   .weight_zeros = zeros.data()};
  EXPECT_THAT(MatmulCpu(f32, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("i4 weights only")));
  // Members of a group share the group size (they share the activations' group sums).
  Int4Problem other(2, 3, 64, 64, false, false, 2);
  const std::vector<MatmulParams> mixed = {problem.Params(problem.out.data()),
                                           other.Params(other.out.data(), problem.in.data())};
  EXPECT_THAT(MatmulGroupCpu(mixed, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("weight_group_size")));
}

// ---- (b) the device's int4 GEMV for decode batches (emulated, or on a GPU) against the spec ----
// It takes bf16 activations and f32-dequantized weights (W4A16, as the device's GEMM panels do),
// not the CPU decode path's int8 activations.

using GemvBackend = testing::KernelBackend<MatmulParams>;
class MatmulInt4GemvKernelTest : public ::testing::TestWithParam<GemvBackend> {};

TEST_P(MatmulInt4GemvKernelTest, MatchesTheReferenceOfBf16Activations) {
  const GemvBackend backend = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  for (int m : {1, 2, 5, kMatmulInt4GemvMaxRows}) {
    for (auto [n, k, group] : {std::tuple{1, 32, 32}, {33, 256, 128}, {100, 1024, 64},
                               {17, 2048, 128}}) {
      for (bool zeros : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "m " << m << " n " << n << " k " << k << " zeros "
                                          << zeros);
        Int4Problem problem(m, n, k, group, zeros, /*with_bias=*/n == 33, 500 + m + n + k);
        const std::vector<float> in = reference::RoundToBf16(problem.in);
        std::vector<float> expected(problem.out.size());
        reference::Matmul(problem.Params(expected.data(), in.data()));
        ASSERT_THAT(backend.run(problem.Params(problem.out.data())), IsOk());
        EXPECT_TRUE(AllClose(problem.out, expected, SumTolerance(k, zeros)));
      }
    }
  }
}

TEST(MatmulInt4GemvTest, TakesInt4WeightsAndDecodeBatchesOnly) {
  Int4Problem batch(kMatmulInt4GemvMaxRows + 1, 3, 64, 32, false, false, 1);
  EXPECT_THAT(MatmulInt4GemvEmulated(batch.Params(batch.out.data())),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("m 9 > 8")));
  const std::vector<float> weight(3 * 4, 1.0f);
  std::vector<float> out(6);
  const std::vector<float> in(8, 1.0f);
  EXPECT_THAT(MatmulInt4GemvEmulated({.out = out.data(), .in = in.data(), .weight = weight.data(),
                                      .weight_dtype = DType::kF32, .bias = nullptr, .m = 2, .n = 3,
                                      .k = 4}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not i4")));
}

std::string GemvTestName(const ::testing::TestParamInfo<GemvBackend>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Emulated, MatmulInt4GemvKernelTest,
                         ::testing::Values(GemvBackend{"emulated", &MatmulInt4GemvEmulated,
                                                       &testing::AlwaysAvailable}),
                         GemvTestName);
#if BATON_HAS_CUDA
INSTANTIATE_TEST_SUITE_P(Cuda, MatmulInt4GemvKernelTest,
                         ::testing::Values(GemvBackend{"cuda", &testing::MatmulInt4GemvOnDevice,
                                                       &testing::CudaDeviceAvailable}),
                         GemvTestName);
#endif

}  // namespace
}  // namespace baton::kernels
