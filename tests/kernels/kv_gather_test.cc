#include "baton/kernels/kv_gather.h"

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
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

constexpr float kUnwritten = -7.0f;  // what the output holds where the gather must not write

// A paged cache of sequences with the given lengths (unused slots and the poison block are NaN),
// and output rows one column wider than a token's K/V row.
struct GatherProblem {
  TestPagedKvCache cache;
  int row_elems;
  int out_stride;
  std::vector<int32_t> out_start;
  std::vector<float> k_out;
  std::vector<float> v_out;

  GatherProblem(const std::vector<int>& lens, int block_size, int num_kv_heads, int head_dim,
                uint64_t placement_seed, DType dtype = DType::kF32)
      : cache(lens, block_size, num_kv_heads, head_dim, /*content_seed=*/21, placement_seed,
              /*extra_blocks=*/3, dtype),
        row_elems(num_kv_heads * head_dim),
        out_stride(num_kv_heads * head_dim + 1) {
    out_start.push_back(0);
    for (int len : lens) out_start.push_back(out_start.back() + len);
    k_out.assign(static_cast<size_t>(out_start.back()) * out_stride, kUnwritten);
    v_out.assign(k_out.size(), kUnwritten);
  }
  KvGatherParams Params() {
    int max_len = 0;
    for (int len : cache.context_lens()) max_len = std::max(max_len, len);
    return {.k_out = k_out.data(),
            .v_out = v_out.data(),
            .cache = cache.view(),
            .block_tables = cache.block_tables().data(),
            .out_start = out_start.data(),
            .num_seqs = cache.num_seqs(),
            .max_blocks_per_seq = cache.max_blocks_per_seq(),
            .out_stride = out_stride,
            .max_len = max_len};
  }
  // The dense expectation: each sequence's logical K (or V) rows, kUnwritten in the spare column.
  std::vector<float> Expected(bool values) const {
    std::vector<float> out(k_out.size(), kUnwritten);
    for (int s = 0; s < cache.num_seqs(); ++s) {
      const std::vector<float>& dense = values ? cache.dense_v(s) : cache.dense_k(s);
      for (int j = 0; j < cache.context_lens()[s]; ++j) {
        for (int i = 0; i < row_elems; ++i) {
          out[static_cast<size_t>(out_start[s] + j) * out_stride + i] = dense[j * row_elems + i];
        }
      }
    }
    return out;
  }
};

// lens, block_size, num_kv_heads, the cache's dtype
using Shape = std::tuple<std::vector<int>, int, int, DType>;

// (a) the fast CPU twin vs the dense logical contents (bf16: widened exactly), and vs the
// reference.
class KvGatherCpuTest : public ::testing::TestWithParam<Shape> {};

TEST_P(KvGatherCpuTest, MatchesDenseContents) {
  const auto& [lens, block_size, num_kv_heads, dtype] = GetParam();
  GatherProblem fast(lens, block_size, num_kv_heads, 24, 5, dtype);
  GatherProblem ref(lens, block_size, num_kv_heads, 24, 5, dtype);
  ThreadPool pool(2);
  ASSERT_THAT(KvGatherCpu(fast.Params(), &pool), IsOk());
  reference::KvGather(ref.Params());
  EXPECT_TRUE(AllClose(fast.k_out, fast.Expected(false), {0, 0}));
  EXPECT_TRUE(AllClose(fast.v_out, fast.Expected(true), {0, 0}));
  EXPECT_TRUE(AllClose(ref.k_out, fast.k_out, {0, 0}));
  EXPECT_TRUE(AllClose(ref.v_out, fast.v_out, {0, 0}));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, KvGatherCpuTest,
    ::testing::Combine(::testing::Values(std::vector<int>{1}, std::vector<int>{54, 0, 97},
                                         std::vector<int>{256, 1000, 17, 1}),
                       ::testing::Values(1, 16), ::testing::Values(1, 8),
                       ::testing::Values(DType::kF32, DType::kBF16)));

// (c) invariants: the gathered rows do not depend on where the blocks sit (a permutation of the
// physical block ids), and no unused slot is read (they hold NaN, which would show in the output).
TEST(KvGatherCpuTest, IndependentOfBlockPlacementAndReadsNoPadding) {
  GatherProblem a({54, 97, 3}, 16, 4, 8, /*placement_seed=*/1);
  GatherProblem b({54, 97, 3}, 16, 4, 8, /*placement_seed=*/2);
  ASSERT_NE(a.cache.block_tables(), b.cache.block_tables());
  ASSERT_THAT(KvGatherCpu(a.Params(), nullptr), IsOk());
  ASSERT_THAT(KvGatherCpu(b.Params(), nullptr), IsOk());
  EXPECT_TRUE(AllClose(a.k_out, b.k_out, {0, 0}));
  EXPECT_TRUE(AllClose(a.v_out, b.v_out, {0, 0}));
  for (float x : a.k_out) ASSERT_FALSE(std::isnan(x));
  for (float x : a.v_out) ASSERT_FALSE(std::isnan(x));
}

TEST(KvGatherCpuTest, RejectsBadIndicesBeforeWriting) {
  GatherProblem problem({20, 5}, 16, 2, 8, 3);
  KvGatherParams p = problem.Params();
  std::vector<int32_t> tables = problem.cache.block_tables();
  tables[problem.cache.max_blocks_per_seq()] = p.cache.num_blocks;  // sequence 1, block 0
  p.block_tables = tables.data();
  EXPECT_THAT(KvGatherCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sequence 1")));
  for (float x : problem.k_out) ASSERT_EQ(x, kUnwritten);

  p = problem.Params();
  std::vector<int32_t> starts = {0, 20, 10};
  p.out_start = starts.data();
  EXPECT_THAT(KvGatherCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sequence 1")));
  starts = {0, 16 * p.max_blocks_per_seq + 1, 30};
  p.out_start = starts.data();
  EXPECT_THAT(KvGatherCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sequence 0")));
  p = problem.Params();
  p.out_stride = 15;
  EXPECT_THAT(KvGatherCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("out_stride")));
  p = problem.Params();
  p.v_out = nullptr;
  EXPECT_THAT(KvGatherCpu(p, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
  p.num_seqs = 0;
  p.k_out = p.v_out = nullptr;
  EXPECT_THAT(KvGatherCpu(p, nullptr), IsOk());
}

// (b) the CUDA kernel (emulated, or on a GPU) vs the CPU twin.
using Backend = testing::KernelBackend<KvGatherParams>;
class KvGatherKernelTest
    : public ::testing::TestWithParam<std::tuple<Backend, int, int, DType>> {};

TEST_P(KvGatherKernelTest, MatchesCpu) {
  const auto [backend, num_kv_heads, block_size, dtype] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  const std::vector<int> lens = {1, 54, 0, 97};
  GatherProblem expected(lens, block_size, num_kv_heads, 40, 11, dtype);
  GatherProblem actual(lens, block_size, num_kv_heads, 40, 11, dtype);
  ASSERT_THAT(KvGatherCpu(expected.Params(), nullptr), IsOk());
  ASSERT_THAT(backend.run(actual.Params()), IsOk());
  EXPECT_TRUE(AllClose(actual.k_out, expected.k_out, {0, 0}));
  EXPECT_TRUE(AllClose(actual.v_out, expected.v_out, {0, 0}));
}

TEST(KvGatherKernelTest, EmulatedRejectsMissingMaxLen) {
  GatherProblem problem({4}, 16, 1, 8, 3);
  KvGatherParams p = problem.Params();
  p.max_len = 0;
  EXPECT_THAT(KvGatherEmulated(p),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_len")));
}

std::string KernelTestName(
    const ::testing::TestParamInfo<std::tuple<Backend, int, int, DType>>& info) {
  return std::string(std::get<0>(info.param).name) + "_h" +
         std::to_string(std::get<1>(info.param)) + "_bs" + std::to_string(std::get<2>(info.param)) +
         "_" + std::string(DTypeName(std::get<3>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(
    Emulated, KvGatherKernelTest,
    ::testing::Combine(::testing::Values(Backend{"emulated", &KvGatherEmulated,
                                                 &testing::AlwaysAvailable}),
                       ::testing::Values(1, 4), ::testing::Values(1, 16),
                       ::testing::Values(DType::kF32, DType::kBF16)),
    KernelTestName);
#if BATON_HAS_CUDA
INSTANTIATE_TEST_SUITE_P(
    Cuda, KvGatherKernelTest,
    ::testing::Combine(::testing::Values(Backend{"cuda", &testing::KvGatherOnDevice,
                                                 &testing::CudaDeviceAvailable}),
                       ::testing::Values(1, 4, 8), ::testing::Values(1, 16),
                       ::testing::Values(DType::kF32, DType::kBF16)),
    KernelTestName);
#endif

}  // namespace
}  // namespace baton::kernels
