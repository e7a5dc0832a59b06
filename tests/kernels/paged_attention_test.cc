#include "baton/kernels/paged_attention.h"

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
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
using testing::AllFinite;
using testing::TestPagedKvCache;
using testing::ToleranceFor;
using ::testing::HasSubstr;

constexpr int kNumKvHeads = 2;

struct DecodeCase {
  int batch;
  int max_kv_len;
  int block_size;
  int group;  // query heads per kv head
  int head_dim = 64;
  DType dtype = DType::kF32;  // of the cache
};

// Context lengths in [1, max_kv_len], the first one exactly max_kv_len.
std::vector<int> ContextLens(const DecodeCase& c, uint64_t seed) {
  kernels::reference::TestRng rng(seed);
  std::vector<int> lens(c.batch);
  for (int s = 0; s < c.batch; ++s) {
    lens[s] = s == 0 ? c.max_kv_len : static_cast<int>(rng.UniformInt(1, c.max_kv_len));
  }
  return lens;
}

// A decode problem: the cache, queries (with a padded stride) and a NaN-filled output.
struct DecodeProblem {
  DecodeCase c;
  TestPagedKvCache cache;
  int num_heads;
  int q_stride;
  std::vector<float> q;
  std::vector<float> out;

  DecodeProblem(const DecodeCase& dc, uint64_t seed, uint64_t placement_seed = 99)
      : c(dc),
        cache(ContextLens(dc, seed), dc.block_size, kNumKvHeads, dc.head_dim, seed + 1,
              placement_seed, /*extra_blocks=*/3, dc.dtype),
        num_heads(kNumKvHeads * dc.group),
        q_stride(num_heads * dc.head_dim + 3),
        q(kernels::reference::RandomVector(size_t(dc.batch) * q_stride, seed + 2)),
        out(size_t(dc.batch) * num_heads * dc.head_dim, NAN) {}

  PagedAttentionParams Params(float* out_ptr) {
    return {.out = out_ptr,
            .q = q.data(),
            .cache = cache.view(),
            .block_tables = cache.block_tables().data(),
            .context_lens = cache.context_lens().data(),
            .num_seqs = c.batch,
            .num_heads = num_heads,
            .max_blocks_per_seq = cache.max_blocks_per_seq(),
            .q_stride = q_stride,
            .scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  }
  std::vector<float> Reference() {
    std::vector<float> expected(out.size());
    reference::PagedAttentionDecode(Params(expected.data()));
    return expected;
  }
};

std::string CaseName(const DecodeCase& c) {
  return absl::StrCat("b", c.batch, "_kv", c.max_kv_len, "_bs", c.block_size, "_g", c.group,
                      "_d", c.head_dim, "_", std::string(DTypeName(c.dtype)));
}

// (a) the fast CPU kernel vs the dense reference (gather through the block table, then textbook
// softmax attention). Unused slots and table entries hold NaN, so any stray read fails the test.
class PagedAttentionCpuTest : public ::testing::TestWithParam<std::tuple<int, int, int, int>> {};

TEST_P(PagedAttentionCpuTest, MatchesDenseReference) {
  const auto [batch, kv_len, block_size, group] = GetParam();
  DecodeProblem problem({batch, kv_len, block_size, group}, 1000 + batch * 7 + kv_len);
  ThreadPool pool(2);
  ASSERT_THAT(PagedAttentionDecodeCpu(problem.Params(problem.out.data()), &pool), IsOk());
  EXPECT_TRUE(AllFinite(problem.out));
  EXPECT_TRUE(AllClose(problem.out, problem.Reference(), ToleranceFor(DType::kF32)));
}

INSTANTIATE_TEST_SUITE_P(Sweep, PagedAttentionCpuTest,
                         ::testing::Combine(::testing::Values(1, 12, 17),
                                            ::testing::Values(1, 54, 97, 256, 1000),
                                            ::testing::Values(1, 16), ::testing::Values(1, 4, 8)));

TEST(PagedAttentionCpuTest, OddHeadDimsMatchReference) {
  for (int head_dim : {1, 15, 24, 50, 80, 128, 200}) {  // partial vectors and register tiles
    DecodeProblem problem({5, 77, 16, 4, head_dim}, 31 + head_dim);
    ASSERT_THAT(PagedAttentionDecodeCpu(problem.Params(problem.out.data()), nullptr), IsOk());
    EXPECT_TRUE(AllClose(problem.out, problem.Reference(), ToleranceFor(DType::kF32)))
        << "head_dim " << head_dim;
  }
}

TEST(PagedAttentionCpuTest, QueryGroupSizesMatchReference) {
  for (int group : {2, 3, 5, 6, 7}) {  // the register tiles take up to 4 query heads at a time
    DecodeProblem problem({3, 77, 16, group, 40}, 7 + group);
    ASSERT_THAT(PagedAttentionDecodeCpu(problem.Params(problem.out.data()), nullptr), IsOk());
    EXPECT_TRUE(AllClose(problem.out, problem.Reference(), ToleranceFor(DType::kF32)))
        << "group " << group;
  }
}

// A bf16 cache: the kernel widens what the cache holds, so it matches the reference (which reads the
// same bf16 values) to f32's tolerance, through every register-tile shape.
class PagedAttentionCpuBf16Test : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(PagedAttentionCpuBf16Test, MatchesDenseReference) {
  DecodeProblem problem(GetParam(), 500 + GetParam().head_dim);
  ThreadPool pool(2);
  ASSERT_THAT(PagedAttentionDecodeCpu(problem.Params(problem.out.data()), &pool), IsOk());
  EXPECT_TRUE(AllFinite(problem.out));
  EXPECT_TRUE(AllClose(problem.out, problem.Reference(), ToleranceFor(DType::kF32)));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PagedAttentionCpuBf16Test,
    ::testing::Values(DecodeCase{1, 1, 1, 1, 64, DType::kBF16},
                      DecodeCase{12, 1000, 16, 4, 64, DType::kBF16},
                      DecodeCase{17, 97, 1, 8, 64, DType::kBF16},
                      DecodeCase{5, 77, 16, 3, 15, DType::kBF16},
                      DecodeCase{5, 77, 16, 5, 80, DType::kBF16},
                      DecodeCase{3, 300, 16, 2, 128, DType::kBF16},
                      DecodeCase{3, 77, 16, 1, 200, DType::kBF16}),
    [](const auto& info) { return CaseName(info.param); });

// (c) invariants.
TEST(PagedAttentionCpuTest, BatchedEqualsPerSequence) {
  DecodeProblem problem({12, 300, 16, 4}, 5);
  ThreadPool pool(2);
  ASSERT_THAT(PagedAttentionDecodeCpu(problem.Params(problem.out.data()), &pool), IsOk());
  const int row = problem.num_heads * problem.c.head_dim;
  std::vector<float> single(row);
  for (int s = 0; s < problem.c.batch; ++s) {
    PagedAttentionParams p = problem.Params(single.data());
    p.num_seqs = 1;
    p.q += s * problem.q_stride;
    p.block_tables += s * p.max_blocks_per_seq;
    p.context_lens += s;
    ASSERT_THAT(PagedAttentionDecodeCpu(p, nullptr), IsOk());
    for (int i = 0; i < row; ++i) {
      ASSERT_EQ(single[i], problem.out[s * row + i]) << "sequence " << s << " element " << i;
    }
  }
}

TEST(PagedAttentionCpuTest, PermutingPhysicalBlocksChangesNothing) {
  DecodeProblem a({17, 200, 16, 8}, 9, /*placement_seed=*/1);
  DecodeProblem b({17, 200, 16, 8}, 9, /*placement_seed=*/2);
  ASSERT_NE(a.cache.block_tables(), b.cache.block_tables());
  ThreadPool pool(2);
  ASSERT_THAT(PagedAttentionDecodeCpu(a.Params(a.out.data()), &pool), IsOk());
  ASSERT_THAT(PagedAttentionDecodeCpu(b.Params(b.out.data()), &pool), IsOk());
  EXPECT_EQ(a.out, b.out);
}

TEST(PagedAttentionCpuTest, LargeScoresStayFinite) {
  DecodeProblem problem({3, 500, 16, 4}, 13);
  for (float& x : problem.q) x *= 300.0f;  // scores in the hundreds: exp would overflow unshifted
  ASSERT_THAT(PagedAttentionDecodeCpu(problem.Params(problem.out.data()), nullptr), IsOk());
  EXPECT_TRUE(AllFinite(problem.out));
  EXPECT_TRUE(AllClose(problem.out, problem.Reference(), {.atol = 1e-4, .rtol = 1e-4}));
}

TEST(PagedAttentionCpuTest, RejectsBadTablesAndShapes) {
  DecodeProblem problem({3, 40, 16, 4}, 17);
  std::vector<int32_t> lens = problem.cache.context_lens();
  PagedAttentionParams p = problem.Params(problem.out.data());
  lens[1] = 0;
  p.context_lens = lens.data();
  EXPECT_THAT(PagedAttentionDecodeCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sequence 1")));
  lens = problem.cache.context_lens();
  lens[2] = p.max_blocks_per_seq * 16 + 1;
  p.context_lens = lens.data();
  EXPECT_THAT(PagedAttentionDecodeCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sequence 2")));

  std::vector<int32_t> tables = problem.cache.block_tables();
  tables[0] = 1 << 20;
  p = problem.Params(problem.out.data());
  p.block_tables = tables.data();
  EXPECT_THAT(PagedAttentionDecodeCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("block table entry 0")));

  p = problem.Params(problem.out.data());
  p.num_heads = 7;
  EXPECT_THAT(PagedAttentionDecodeCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_kv_heads")));
  p = problem.Params(problem.out.data());
  p.cache.block_stride = 1;
  EXPECT_THAT(PagedAttentionDecodeCpu(p, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("block_stride")));
}

// (b) the CUDA kernel (emulated, or on a GPU) vs the CPU twin.
using Backend = testing::KernelBackend<PagedAttentionParams>;
class PagedAttentionKernelTest : public ::testing::TestWithParam<std::tuple<Backend, DecodeCase>> {};

TEST_P(PagedAttentionKernelTest, MatchesCpu) {
  const auto [backend, c] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  DecodeProblem problem(c, 77);
  std::vector<float> expected(problem.out.size());
  ASSERT_THAT(PagedAttentionDecodeCpu(problem.Params(expected.data()), nullptr), IsOk());
  ASSERT_THAT(backend.run(problem.Params(problem.out.data())), IsOk());
  EXPECT_TRUE(AllFinite(problem.out));
  EXPECT_TRUE(AllClose(problem.out, expected, ToleranceFor(DType::kF32)));
}

std::string KernelTestName(const ::testing::TestParamInfo<std::tuple<Backend, DecodeCase>>& info) {
  return absl::StrCat(std::get<0>(info.param).name, "_", CaseName(std::get<1>(info.param)));
}

// kv_len 600 spans two of the kernel's 512-key chunks; head_dim 80 leaves threads idle.
const auto kEmulatedCases = ::testing::Values(
    DecodeCase{1, 1, 1, 1}, DecodeCase{1, 54, 16, 4}, DecodeCase{5, 97, 1, 1},
    DecodeCase{5, 97, 16, 8}, DecodeCase{2, 600, 16, 1}, DecodeCase{3, 54, 16, 4, 80},
    DecodeCase{2, 40, 16, 1, 256}, DecodeCase{5, 97, 16, 8, 64, DType::kBF16},
    DecodeCase{2, 600, 16, 1, 80, DType::kBF16});

INSTANTIATE_TEST_SUITE_P(Emulated, PagedAttentionKernelTest,
                         ::testing::Combine(::testing::Values(Backend{
                                                "emulated", &PagedAttentionDecodeEmulated,
                                                &testing::AlwaysAvailable}),
                                            kEmulatedCases),
                         KernelTestName);
#if BATON_HAS_CUDA
INSTANTIATE_TEST_SUITE_P(
    Cuda, PagedAttentionKernelTest,
    ::testing::Combine(::testing::Values(Backend{"cuda", &testing::PagedAttentionDecodeOnDevice,
                                                 &testing::CudaDeviceAvailable}),
                       ::testing::Values(DecodeCase{1, 1, 1, 1}, DecodeCase{12, 256, 16, 4},
                                         DecodeCase{17, 1000, 16, 8}, DecodeCase{17, 97, 1, 1},
                                         DecodeCase{3, 54, 16, 4, 80},
                                         DecodeCase{17, 1000, 16, 8, 128, DType::kBF16})),
    KernelTestName);
#endif

}  // namespace
}  // namespace baton::kernels
