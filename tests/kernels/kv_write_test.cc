#include "baton/kernels/kv_write.h"

#include <cmath>
#include <cstddef>
#include <cstring>
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
#include "tests/testing/paged_kv_cache.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tolerance.h"

namespace baton::kernels {
namespace {

using absl_testing::IsOk;
using absl_testing::StatusIs;
using testing::AllClose;
using testing::TestPagedKvCache;
using ::testing::HasSubstr;

struct WriteCase {
  int num_tokens;
  int block_size;
  int num_kv_heads;
  int head_dim;
  DType dtype = DType::kF32;  // of the cache
};

// Element i of a cache's K or V as f32.
float Element(const PagedKvView& view, const void* data, int64_t i) {
  return view.dtype == DType::kBF16 ? Bf16ToF32(static_cast<const uint16_t*>(data)[i])
                                    : static_cast<const float*>(data)[i];
}

// The pools' bytes are equal (NaN padding included, which AllClose would have to special-case).
bool SamePools(TestPagedKvCache& a, TestPagedKvCache& b) {
  return a.k_pool().size() == b.k_pool().size() &&
         std::memcmp(a.k_pool().data(), b.k_pool().data(), a.k_pool().size() * sizeof(float)) == 0 &&
         std::memcmp(a.v_pool().data(), b.v_pool().data(), a.v_pool().size() * sizeof(float)) == 0;
}

// New tokens for an existing cache: token t goes to a distinct slot of the cache's sequences
// (overwriting), every fifth token is padding (slot -1).
struct WriteProblem {
  WriteCase c;
  TestPagedKvCache cache;
  int kv_stride;
  std::vector<float> k;
  std::vector<float> v;
  std::vector<int32_t> slot_mapping;

  WriteProblem(const WriteCase& wc, uint64_t seed)
      : c(wc),
        cache({wc.num_tokens + 5, 3}, wc.block_size, wc.num_kv_heads, wc.head_dim, seed, seed + 1,
              /*extra_blocks=*/3, wc.dtype),
        kv_stride(wc.num_kv_heads * wc.head_dim + 2),
        k(kernels::reference::RandomVector(size_t(wc.num_tokens) * kv_stride, seed + 2)),
        v(kernels::reference::RandomVector(size_t(wc.num_tokens) * kv_stride, seed + 3)) {
    for (int t = 0; t < c.num_tokens; ++t) {
      slot_mapping.push_back(t % 5 == 4 ? -1 : static_cast<int32_t>(cache.SlotIndex(0, t + 2)));
    }
  }
  KvWriteParams Params() {
    return {.cache = cache.view(),
            .k = k.data(),
            .v = v.data(),
            .slot_mapping = slot_mapping.data(),
            .num_tokens = c.num_tokens,
            .kv_stride = kv_stride};
  }
};

// (a) fast CPU vs reference: the whole pools (NaN padding included) must be identical, bf16's
// rounding too.
class KvWriteCpuTest : public ::testing::TestWithParam<std::tuple<int, int, int, DType>> {};

TEST_P(KvWriteCpuTest, MatchesReference) {
  const auto [num_tokens, block_size, num_kv_heads, dtype] = GetParam();
  WriteProblem fast({num_tokens, block_size, num_kv_heads, 24, dtype}, 3);
  WriteProblem ref({num_tokens, block_size, num_kv_heads, 24, dtype}, 3);
  ThreadPool pool(2);
  ASSERT_THAT(KvWriteCpu(fast.Params(), &pool), IsOk());
  reference::KvWrite(ref.Params());
  EXPECT_TRUE(SamePools(fast.cache, ref.cache));
}

INSTANTIATE_TEST_SUITE_P(Shapes, KvWriteCpuTest,
                         ::testing::Combine(::testing::Values(1, 12, 17, 300),
                                            ::testing::Values(1, 16), ::testing::Values(1, 8),
                                            ::testing::Values(DType::kF32, DType::kBF16)));

// (c) what was written reads back at its slot (bf16: rounded to nearest); padding tokens and other
// slots are untouched.
class KvWriteReadBackTest : public ::testing::TestWithParam<DType> {};

TEST_P(KvWriteReadBackTest, WrittenTokensReadBackAndPaddingIsSkipped) {
  const DType dtype = GetParam();
  WriteProblem problem({23, 16, 2, 8, dtype}, 5);
  const std::vector<float> k_before = problem.cache.k_pool();
  ASSERT_THAT(KvWriteCpu(problem.Params(), nullptr), IsOk());
  const PagedKvView view = problem.cache.view();
  const int num_kv_heads = 2, head_dim = 8;
  for (int t = 0; t < 23; ++t) {
    if (problem.slot_mapping[t] < 0) continue;
    for (int h = 0; h < num_kv_heads; ++h) {
      const int64_t offset = KvOffset(view, problem.slot_mapping[t], h);
      for (int d = 0; d < head_dim; ++d) {
        const int64_t src = t * problem.kv_stride + h * head_dim + d;
        const float k = problem.k[src], v = problem.v[src];
        const float k_stored = dtype == DType::kBF16 ? Bf16ToF32(F32ToBf16(k)) : k;
        const float v_stored = dtype == DType::kBF16 ? Bf16ToF32(F32ToBf16(v)) : v;
        ASSERT_EQ(Element(view, view.k, offset + d), k_stored) << "token " << t << " head " << h;
        ASSERT_EQ(Element(view, view.v, offset + d), v_stored) << "token " << t << " head " << h;
        if (dtype == DType::kBF16) {
          ASSERT_LE(std::abs(k_stored - k), std::abs(k) / 256);  // one rounding, 2^-9 relative
        }
      }
    }
  }
  // Token 4 was padding: its would-be slot (sequence 0, position 6) keeps the old value.
  const int64_t layer_offset = (static_cast<std::byte*>(view.k) -
                                reinterpret_cast<std::byte*>(problem.cache.k_pool().data())) /
                               static_cast<int64_t>(DTypeBytes(dtype));
  const int64_t untouched = KvOffset(view, problem.cache.SlotIndex(0, 6), 0) + layer_offset;
  const float before = dtype == DType::kBF16
                           ? Bf16ToF32(reinterpret_cast<const uint16_t*>(k_before.data())[untouched])
                           : k_before[untouched];
  EXPECT_EQ(problem.cache.PoolElement(problem.cache.k_pool(), untouched), before);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, KvWriteReadBackTest,
                         ::testing::Values(DType::kF32, DType::kBF16),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

TEST(KvWriteCpuTest, RejectsOutOfRangeSlotsBeforeWriting) {
  WriteProblem problem({6, 16, 2, 8}, 7);
  const std::vector<float> k_before = problem.cache.k_pool();
  problem.slot_mapping[3] = problem.cache.view().num_blocks * 16;
  EXPECT_THAT(KvWriteCpu(problem.Params(), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("token 3")));
  EXPECT_TRUE(AllClose(problem.cache.k_pool(), k_before, {0, 0}));
  KvWriteParams p = problem.Params();
  p.kv_stride = 3;
  EXPECT_THAT(KvWriteCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("kv_stride")));
  p = problem.Params();
  p.cache.v = nullptr;
  EXPECT_THAT(KvWriteCpu(p, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
}

// (b) the CUDA kernel (emulated, or on a GPU) vs the CPU twin.
using Backend = testing::KernelBackend<KvWriteParams>;
class KvWriteKernelTest
    : public ::testing::TestWithParam<std::tuple<Backend, int, int, DType>> {};

TEST_P(KvWriteKernelTest, MatchesCpu) {
  const auto [backend, num_tokens, block_size, dtype] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  WriteProblem expected({num_tokens, block_size, 2, 40, dtype}, 11);
  WriteProblem actual({num_tokens, block_size, 2, 40, dtype}, 11);
  ASSERT_THAT(KvWriteCpu(expected.Params(), nullptr), IsOk());
  ASSERT_THAT(backend.run(actual.Params()), IsOk());
  EXPECT_TRUE(SamePools(actual.cache, expected.cache));  // bf16: the same rounding, bit for bit
}

std::string KernelTestName(
    const ::testing::TestParamInfo<std::tuple<Backend, int, int, DType>>& info) {
  return std::string(std::get<0>(info.param).name) + "_t" +
         std::to_string(std::get<1>(info.param)) + "_bs" + std::to_string(std::get<2>(info.param)) +
         "_" + std::string(DTypeName(std::get<3>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(
    Emulated, KvWriteKernelTest,
    ::testing::Combine(::testing::Values(Backend{"emulated", &KvWriteEmulated,
                                                 &testing::AlwaysAvailable}),
                       ::testing::Values(1, 12, 17), ::testing::Values(1, 16),
                       ::testing::Values(DType::kF32, DType::kBF16)),
    KernelTestName);
#if BATON_HAS_CUDA
INSTANTIATE_TEST_SUITE_P(
    Cuda, KvWriteKernelTest,
    ::testing::Combine(::testing::Values(Backend{"cuda", &testing::KvWriteOnDevice,
                                                 &testing::CudaDeviceAvailable}),
                       ::testing::Values(1, 17, 300), ::testing::Values(1, 16),
                       ::testing::Values(DType::kF32, DType::kBF16)),
    KernelTestName);
#endif

}  // namespace
}  // namespace baton::kernels
