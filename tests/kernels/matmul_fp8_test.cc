// fp8 E4M3 weights: the scalar conversions (dtype.h) against the format's definition; MatmulCpu
// with fp8 weights (a scale per row or per group of columns): every code through every path, the
// GEMV and panel paths against the reference, the portable twin against the fast one, and the
// params' checks; and the device's fp8 GEMV (emulated, or on a GPU) against the reference.
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "baton/kernels/matmul.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/dtype.h"
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

bool IsNanCode(int code) { return (code & 0x7F) == 0x7F; }

// The OCP definition: (-1)^s * 2^(e - 7) * (1 + m / 8), or 2^-6 * m / 8 when e == 0.
double Fp8Definition(int code) {
  const int e = (code >> 3) & 0xF;
  const int m = code & 7;
  const double magnitude = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1 + m / 8.0, e - 7);
  return (code & 0x80) != 0 ? -magnitude : magnitude;
}

TEST(Fp8E4M3Test, EveryCodeDecodesAsTheFormatDefinesIt) {
  for (int code = 0; code < 256; ++code) {
    const float value = Fp8E4M3ToF32(static_cast<uint8_t>(code));
    if (IsNanCode(code)) {
      EXPECT_TRUE(std::isnan(value)) << code;
    } else {
      EXPECT_EQ(value, Fp8Definition(code)) << code;
    }
  }
  EXPECT_EQ(Fp8E4M3ToF32(0x7E), 448.0f);
  EXPECT_EQ(Fp8E4M3ToF32(0x01), std::ldexp(1.0f, -9));
}

TEST(Fp8E4M3Test, EncodingRoundsToNearestEvenAndSaturates) {
  for (int code = 0; code < 256; ++code) {
    if (IsNanCode(code)) continue;
    EXPECT_EQ(F32ToFp8E4M3(Fp8E4M3ToF32(static_cast<uint8_t>(code))), code)
        << code;
  }
  // Midpoints between neighbours go to the even code, others to the nearest.
  for (int code = 0; code < 0x7E; ++code) {
    const double low = Fp8Definition(code);
    const double high = Fp8Definition(code + 1);
    const float mid = static_cast<float>((low + high) / 2);
    EXPECT_EQ(F32ToFp8E4M3(mid), code % 2 == 0 ? code : code + 1) << code;
    EXPECT_EQ(F32ToFp8E4M3(-mid), 0x80 | (code % 2 == 0 ? code : code + 1)) << code;
    EXPECT_EQ(F32ToFp8E4M3(static_cast<float>(low + (high - low) * 0.3)), code) << code;
    EXPECT_EQ(F32ToFp8E4M3(static_cast<float>(low + (high - low) * 0.7)), code + 1) << code;
  }
  EXPECT_EQ(F32ToFp8E4M3(463.9f), 0x7E);
  EXPECT_EQ(F32ToFp8E4M3(464.0f), 0x7E);
  EXPECT_EQ(F32ToFp8E4M3(1e9f), 0x7E);
  EXPECT_EQ(F32ToFp8E4M3(-INFINITY), 0xFE);
  EXPECT_EQ(F32ToFp8E4M3(NAN), 0x7F);
  EXPECT_EQ(F32ToFp8E4M3(std::ldexp(1.0f, -11)), 0x00);  // below half the smallest subnormal
}

struct Fp8Problem {
  int m, n, k, group_size;
  std::vector<float> in;
  std::vector<uint8_t> codes;  // [n, k]
  std::vector<float> scales;   // [n] or [n, k / group_size]
  std::vector<float> bias;
  std::vector<float> out;

  Fp8Problem(int m_, int n_, int k_, int group, bool with_bias, uint64_t seed)
      : m(m_), n(n_), k(k_), group_size(group),
        in(reference::RandomVector(size_t(m_) * k_, seed)), out(size_t(m_) * n_, NAN) {
    reference::TestRng rng(seed + 1);
    codes.resize(size_t(n_) * k_);
    for (uint8_t& code : codes) {
      do {
        code = static_cast<uint8_t>(rng.UniformInt(0, 255));
      } while (IsNanCode(code));
    }
    const size_t scale_count = group == 0 ? size_t(n_) : size_t(n_) * (k_ / group);
    // fp8 values reach 448: scales of about 1/448 give weights of about [-1, 1].
    scales = reference::RandomVector(scale_count, seed + 2, 0.5f / 448, 1.5f / 448);
    if (with_bias) bias = reference::RandomVector(n_, seed + 3);
  }
  MatmulParams Params(float* out_ptr, const float* in_ptr = nullptr) const {
    return {.out = out_ptr,
            .in = in_ptr != nullptr ? in_ptr : in.data(),
            .weight = codes.data(),
            .weight_dtype = DType::kF8E4M3,
            .bias = bias.empty() ? nullptr : bias.data(),
            .m = m,
            .n = n,
            .k = k,
            .weight_scales = scales.data(),
            .weight_group_size = group_size};
  }
};

// The spec: activations rounded to bf16, then the dequantized weights' product. Decode sizes widen
// the codes exactly (f32 rounding only); prefill sizes also round scale * fp8 to bf16 on AVX512_BF16
// CPUs, so the bf16 tolerance covers both.
std::vector<float> Expected(const Fp8Problem& problem) {
  const std::vector<float> in = reference::RoundToBf16(problem.in);
  std::vector<float> expected(problem.out.size());
  reference::Matmul(problem.Params(expected.data(), in.data()));
  return expected;
}

testing::Tolerance SumTolerance(int k) { return ScaledForSum(ToleranceFor(DType::kF8E4M3), k, 0.25); }

// m picks the path: the GEMV (row tiles of 4 and the rest) up to 16 rows, dequantized panels above;
// group size 0 is a scale per row (k of any length), else per group of columns.
TEST(MatmulFp8Test, MatchesReference) {
  ThreadPool pool(2);
  for (int m : {1, 2, 3, 4, 5, 8, 16, 17, 40}) {
    for (int n : {1, 7, 33}) {
      for (auto [k, group] : {std::pair{5, 0}, {37, 0}, {100, 0}, {768, 0}, {32, 32}, {256, 128},
                              {384, 128}, {640, 64}}) {
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
          SCOPED_TRACE(::testing::Message() << "m " << m << " n " << n << " k " << k << " group "
                                            << group);
          Fp8Problem problem(m, n, k, group, /*with_bias=*/n == 7, 100 + m + n + k);
          ASSERT_THAT(MatmulCpu(problem.Params(problem.out.data()), p), IsOk());
          EXPECT_TRUE(AllClose(problem.out, Expected(problem), SumTolerance(k)));
        }
      }
    }
  }
}

// Weight row j holds code j in every column: a one-hot activation row reads back each code's value
// (times a power-of-two scale, exact), through the GEMV, the panels and the portable path.
TEST(MatmulFp8Test, EveryCodeWidensExactlyOnEveryPath) {
  constexpr int kN = 256;
  constexpr int kK = 64;
  std::vector<uint8_t> codes(size_t(kN) * kK);
  for (int j = 0; j < kN; ++j) {
    for (int c = 0; c < kK; ++c) codes[size_t(j) * kK + c] = static_cast<uint8_t>(IsNanCode(j) ? 0 : j);
  }
  const std::vector<float> scales(kN * 2, 0.25f);
  for (int group : {0, 32}) {
    for (int m : {1, 5, 20}) {
      std::vector<float> in(size_t(m) * kK, 0.0f);
      for (int i = 0; i < m; ++i) in[size_t(i) * kK + (i * 7) % kK] = 1.0f;
      std::vector<float> out(size_t(m) * kN);
      const MatmulParams params{.out = out.data(), .in = in.data(), .weight = codes.data(),
                                .weight_dtype = DType::kF8E4M3, .bias = nullptr, .m = m, .n = kN,
                                .k = kK, .weight_scales = scales.data(), .weight_group_size = group};
      for (bool portable : {false, true}) {
        if (portable) {
          internal::MatmulFp8Portable(absl::MakeConstSpan(&params, 1), nullptr);
        } else {
          ASSERT_THAT(MatmulCpu(params, nullptr), IsOk());
        }
        for (int i = 0; i < m; ++i) {
          for (int j = 0; j < kN; ++j) {
            const float want = IsNanCode(j) ? 0.0f : 0.25f * Fp8Definition(j);
            ASSERT_EQ(out[size_t(i) * kN + j], want)
                << "code " << j << " m " << m << " group " << group << " portable " << portable;
          }
        }
      }
    }
  }
}

TEST(MatmulFp8Test, PortablePathMatchesTheFastOne) {
  for (int m : {1, 6, 40}) {
    for (int group : {0, 128}) {
      Fp8Problem problem(m, 45, 256, group, true, 8);
      std::vector<float> portable(problem.out.size());
      ThreadPool pool(2);
      ASSERT_THAT(MatmulCpu(problem.Params(problem.out.data()), &pool), IsOk());
      const MatmulParams params = problem.Params(portable.data());
      internal::MatmulFp8Portable(absl::MakeConstSpan(&params, 1), &pool);
      EXPECT_TRUE(AllClose(portable, problem.out, SumTolerance(256))) << "m " << m;
    }
  }
}

// A decode row depends on its own activations only: 13 rows at once equal 13 calls of one row, bit
// for bit through the GEMV (scales per group), up to f32 summation order where a batch of
// per-row-scaled weights takes the dpbf16 tiles (AVX512_BF16 CPUs).
TEST(MatmulFp8Test, DecodeRowsDoNotDependOnTheBatch) {
  for (int group : {0, 128}) {
    Fp8Problem problem(13, 130, 256, group, true, 12);
    ThreadPool pool(2);
    ASSERT_THAT(MatmulCpu(problem.Params(problem.out.data()), &pool), IsOk());
    std::vector<float> row(130);
    for (int i = 0; i < 13; ++i) {
      MatmulParams p = problem.Params(row.data(), problem.in.data() + i * 256);
      p.m = 1;
      ASSERT_THAT(MatmulCpu(p, &pool), IsOk());
      const std::vector<float> batched(problem.out.begin() + i * 130,
                                       problem.out.begin() + (i + 1) * 130);
      if (group > 0 || !internal::CpuHasAvx512Bf16()) {
        EXPECT_EQ(row, batched) << "row " << i << " group " << group;
      } else {
        EXPECT_TRUE(AllClose(row, batched, ToleranceFor(DType::kF32))) << "row " << i;
      }
    }
  }
}

// With power-of-two scales every dequantized weight is exact in bf16 (an fp8 value has 4
// significant bits), so every path is the reference up to f32 summation order.
TEST(MatmulFp8Test, ExactWeightsMatchTheReferenceOnEveryPath) {
  for (int m : {1, 9, 40}) {
    for (int group : {0, 128}) {
      Fp8Problem problem(m, 50, 384, group, true, 31);
      for (size_t i = 0; i < problem.scales.size(); ++i) {
        problem.scales[i] = i % 3 == 0 ? 1.0f / 256 : 1.0f / 512;
      }
      for (bool portable : {false, true}) {
        const MatmulParams params = problem.Params(problem.out.data());
        if (portable) {
          internal::MatmulFp8Portable(absl::MakeConstSpan(&params, 1), nullptr);
        } else {
          ASSERT_THAT(MatmulCpu(params, nullptr), IsOk());
        }
        EXPECT_TRUE(AllClose(problem.out, Expected(problem), ToleranceFor(DType::kF32)))
            << "m " << m << " group " << group << " portable " << portable;
      }
    }
  }
}

TEST(MatmulFp8Test, GroupEqualsEachMemberAlone) {
  for (int m : {1, 3, 20}) {
    const std::vector<float> in = reference::RandomVector(size_t(m) * 128, 3);
    std::vector<Fp8Problem> members;
    for (int i = 0; i < 3; ++i) members.emplace_back(m, 37 + 100 * i, 128, 64, i == 2, 40 + i);
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

TEST(MatmulFp8Test, RejectsBadParams) {
  Fp8Problem problem(2, 3, 128, 64, false, 1);
  MatmulParams p = problem.Params(problem.out.data());
  p.weight_group_size = 48;  // not a multiple of 32
  EXPECT_THAT(MatmulCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("group size 48")));
  p.weight_group_size = 96;  // does not divide k
  EXPECT_THAT(MatmulCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("k 128")));
  p.weight_group_size = -32;
  EXPECT_THAT(MatmulCpu(p, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
  p = problem.Params(problem.out.data());
  p.weight_scales = nullptr;
  EXPECT_THAT(MatmulCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("weight_scales")));
  p = problem.Params(problem.out.data());
  const std::vector<float> zeros(6, 8.0f);
  p.weight_zeros = zeros.data();
  EXPECT_THAT(MatmulCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("weight_zeros")));
}

// ---- (b) the device's fp8 GEMV for decode batches (emulated, or on a GPU) against the spec ----

using GemvBackend = testing::KernelBackend<MatmulParams>;
class MatmulFp8GemvKernelTest : public ::testing::TestWithParam<GemvBackend> {};

TEST_P(MatmulFp8GemvKernelTest, MatchesTheReferenceOfBf16Activations) {
  const GemvBackend backend = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  for (int m : {1, 2, 5, kMatmulFp8GemvMaxRows}) {
    for (auto [n, k, group] : {std::tuple{1, 5, 0}, {33, 256, 128}, {100, 1024, 0},
                               {17, 2048, 128}, {9, 130, 0}}) {
      SCOPED_TRACE(::testing::Message() << "m " << m << " n " << n << " k " << k << " group "
                                        << group);
      Fp8Problem problem(m, n, k, group, /*with_bias=*/n == 33, 500 + m + n + k);
      ASSERT_THAT(backend.run(problem.Params(problem.out.data())), IsOk());
      EXPECT_TRUE(AllClose(problem.out, Expected(problem), SumTolerance(k)));
    }
  }
  // Every code, exactly: weight row j holds code j, one-hot activations read it back.
  std::vector<uint8_t> codes(256 * 32);
  for (int j = 0; j < 256; ++j) {
    for (int c = 0; c < 32; ++c) codes[j * 32 + c] = static_cast<uint8_t>(IsNanCode(j) ? 0 : j);
  }
  const std::vector<float> scales(256, 2.0f);
  std::vector<float> in(32, 0.0f);
  in[3] = 1.0f;
  std::vector<float> out(256);
  ASSERT_THAT(backend.run({.out = out.data(), .in = in.data(), .weight = codes.data(),
                           .weight_dtype = DType::kF8E4M3, .bias = nullptr, .m = 1, .n = 256,
                           .k = 32, .weight_scales = scales.data()}),
              IsOk());
  for (int j = 0; j < 256; ++j) {
    EXPECT_EQ(out[j], IsNanCode(j) ? 0.0f : 2.0f * Fp8Definition(j)) << "code " << j;
  }
}

TEST(MatmulFp8GemvTest, TakesFp8WeightsAndDecodeBatchesOnly) {
  Fp8Problem batch(kMatmulFp8GemvMaxRows + 1, 3, 64, 0, false, 1);
  EXPECT_THAT(MatmulFp8GemvEmulated(batch.Params(batch.out.data())),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("m 9 > 8")));
  const std::vector<float> weight(3 * 4, 1.0f);
  std::vector<float> out(6);
  const std::vector<float> in(8, 1.0f);
  EXPECT_THAT(MatmulFp8GemvEmulated({.out = out.data(), .in = in.data(), .weight = weight.data(),
                                     .weight_dtype = DType::kF32, .bias = nullptr, .m = 2, .n = 3,
                                     .k = 4}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not fp8")));
}

std::string GemvTestName(const ::testing::TestParamInfo<GemvBackend>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Emulated, MatmulFp8GemvKernelTest,
                         ::testing::Values(GemvBackend{"emulated", &MatmulFp8GemvEmulated,
                                                       &testing::AlwaysAvailable}),
                         GemvTestName);
#if BATON_HAS_CUDA
INSTANTIATE_TEST_SUITE_P(Cuda, MatmulFp8GemvKernelTest,
                         ::testing::Values(GemvBackend{"cuda", &testing::MatmulFp8GemvOnDevice,
                                                       &testing::CudaDeviceAvailable}),
                         GemvTestName);
#endif

}  // namespace
}  // namespace baton::kernels
