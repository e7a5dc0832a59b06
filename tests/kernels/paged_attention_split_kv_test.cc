// Split-KV decode attention. Its CPU twin is PagedAttentionDecodeCpu (whose own test,
// paged_attention_test.cc, checks it against the dense reference), so:
//   (a) the host-side functions: the split-count heuristic and the workspace size, table-driven;
//   (b) the CUDA kernels (emulated, or on a GPU) vs the twin over context lengths that do and do
//       not divide into splits, GQA, head_dim 64 and 128, one split, many splits, length-1 contexts;
//   (c) invariants: the split count does not change the result beyond rounding, workspace entries
//       of splits past a context are never read (the workspace starts as NaN), padding slots never
//       read (the test cache holds NaN there), and bad split counts are rejected.
#include "baton/kernels/paged_attention_split_kv.h"

#include <cmath>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/reference/random_tensor.h"
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

struct SplitCase {
  std::vector<int> context_lens;
  int block_size;
  int group;  // query heads per kv head
  int head_dim;
  int num_splits;
  DType dtype = DType::kF32;  // of the cache
};

std::string CaseName(const SplitCase& c) {
  return absl::StrCat("len", absl::StrJoin(c.context_lens, "_"), "_bs", c.block_size, "_g",
                      c.group, "_d", c.head_dim, "_s", c.num_splits, "_", std::string(DTypeName(c.dtype)));
}
void PrintTo(const SplitCase& c, std::ostream* os) { *os << CaseName(c); }

// A decode problem on the test cache (NaN in every slot no token holds), queries with a padded
// stride, a NaN-filled output and a NaN-filled workspace.
struct SplitProblem {
  SplitCase c;
  TestPagedKvCache cache;
  int num_heads;
  int q_stride;
  std::vector<float> q;
  std::vector<float> out;
  std::vector<float> workspace;

  SplitProblem(const SplitCase& sc, uint64_t seed)
      : c(sc),
        cache(sc.context_lens, sc.block_size, kNumKvHeads, sc.head_dim, seed, seed + 1,
              /*extra_blocks=*/3, sc.dtype),
        num_heads(kNumKvHeads * sc.group),
        q_stride(num_heads * sc.head_dim + 3),
        q(kernels::reference::RandomVector(sc.context_lens.size() * q_stride, seed + 2)),
        out(sc.context_lens.size() * num_heads * sc.head_dim, NAN) {
    workspace.assign(PagedAttentionSplitKvWorkspaceBytes(Attn(out.data()), sc.num_splits) /
                         sizeof(float),
                     NAN);
  }

  PagedAttentionParams Attn(float* out_ptr) {
    return {.out = out_ptr,
            .q = q.data(),
            .cache = cache.view(),
            .block_tables = cache.block_tables().data(),
            .context_lens = cache.context_lens().data(),
            .num_seqs = static_cast<int>(c.context_lens.size()),
            .num_heads = num_heads,
            .max_blocks_per_seq = cache.max_blocks_per_seq(),
            .q_stride = q_stride,
            .scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  }
  PagedAttentionSplitKvParams Params() {
    return {.attn = Attn(out.data()), .workspace = workspace.data(), .num_splits = c.num_splits};
  }
  std::vector<float> Twin() {
    std::vector<float> expected(out.size());
    EXPECT_THAT(PagedAttentionDecodeCpu(Attn(expected.data()), nullptr), IsOk());
    return expected;
  }
};

// ---- (a) host-side functions ----

// Params with only the fields the heuristic and the workspace size read.
PagedAttentionParams Shape(int num_seqs, int num_heads, int max_blocks_per_seq, int block_size,
                           int head_dim = 128) {
  PagedAttentionParams p{};
  p.num_seqs = num_seqs;
  p.num_heads = num_heads;
  p.max_blocks_per_seq = max_blocks_per_seq;
  p.cache.block_size = block_size;
  p.cache.num_kv_heads = 1;
  p.cache.head_dim = head_dim;
  return p;
}

TEST(PagedAttentionSplitKvHeuristicTest, SplitsOnlyLongContextsOnAnUnderfilledGpu) {
  struct Row {
    int num_seqs, num_heads, max_blocks_per_seq, block_size, num_sms;
    int expected;
    const char* why;
  };
  const Row rows[] = {
      {1, 32, 2048, 16, 132, 9, "32 items, 32k keys: 2*132/32 -> 9 splits"},
      {1, 8, 2048, 16, 132, 33, "8 items: 264/8 = 33 splits of 63 blocks (1008 keys)"},
      {1, 4, 2048, 16, 132, 64, "capped at kSplitKvMaxSplits"},
      {1, 32, 32, 16, 132, 2, "512 keys: at most 2 splits of >= 256 keys"},
      {1, 32, 31, 16, 132, 1, "496 keys: too short to split"},
      {4, 32, 2048, 16, 132, 3, "128 items, just under 132 SMs: 264/128 -> 3 splits"},
      {5, 32, 2048, 16, 132, 1, "160 items fill 132 SMs"},
      {1, 32, 2048, 16, 0, 1, "SM count unknown"},
      {0, 32, 2048, 16, 132, 1, "no sequences"},
      {1, 2, 63, 16, 108, 3, "1008 keys: 3 splits of 21 blocks"},
      {1, 2, 10, 100, 108, 3, "1000 keys in 10 blocks: 3 splits of 4 blocks (the last 2)"},
  };
  for (const Row& r : rows) {
    const PagedAttentionParams p = Shape(r.num_seqs, r.num_heads, r.max_blocks_per_seq,
                                         r.block_size);
    EXPECT_EQ(PagedAttentionSplitKvNumSplits(p, r.num_sms), r.expected) << r.why;
  }
}

TEST(PagedAttentionSplitKvHeuristicTest, EverySplitHoldsABlockOfTheLongestContext) {
  for (int max_blocks : {2, 3, 7, 10, 63, 64, 65, 1000}) {
    for (int num_heads : {1, 2, 8}) {
      const PagedAttentionParams p = Shape(1, num_heads, max_blocks, 256);
      const int n = PagedAttentionSplitKvNumSplits(p, 132);
      ASSERT_GE(n, 1);
      ASSERT_LE(n, std::min(max_blocks, kSplitKvMaxSplits));
      const PagedAttentionSplitKvLayout layout = SplitKvLayout(p, n);
      EXPECT_LT((n - 1) * layout.blocks_per_split, max_blocks)
          << "max_blocks " << max_blocks << " heads " << num_heads << " splits " << n;
    }
  }
}

TEST(PagedAttentionSplitKvHeuristicTest, WorkspaceHoldsAccumulatorsAndStatistics) {
  const PagedAttentionParams p = Shape(3, 8, 100, 16, 64);
  const PagedAttentionSplitKvLayout layout = SplitKvLayout(p, 5);
  EXPECT_EQ(layout.blocks_per_split, 20);
  EXPECT_EQ(layout.max_offset, 3 * 8 * 5 * 64);
  EXPECT_EQ(layout.sum_offset, layout.max_offset + 3 * 8 * 5);
  EXPECT_EQ(PagedAttentionSplitKvWorkspaceBytes(p, 5), sizeof(float) * 3 * 8 * 5 * (64 + 2));
  EXPECT_EQ(PagedAttentionSplitKvWorkspaceBytes(Shape(0, 8, 100, 16), 5), 0u);
}

// ---- (b) the kernels vs the CPU twin ----

using Backend = testing::KernelBackend<PagedAttentionSplitKvParams>;
class PagedAttentionSplitKvKernelTest
    : public ::testing::TestWithParam<std::tuple<Backend, SplitCase>> {};

TEST_P(PagedAttentionSplitKvKernelTest, MatchesCpu) {
  const auto [backend, c] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  SplitProblem problem(c, 77);
  const std::vector<float> expected = problem.Twin();
  ASSERT_THAT(backend.run(problem.Params()), IsOk());
  EXPECT_TRUE(AllFinite(problem.out));
  EXPECT_TRUE(AllClose(problem.out, expected, ToleranceFor(DType::kF32)));
}

std::string KernelTestName(
    const ::testing::TestParamInfo<std::tuple<Backend, SplitCase>>& info) {
  return absl::StrCat(std::get<0>(info.param).name, "_", CaseName(std::get<1>(info.param)));
}

// The test cache gives each sequence one spare block-table column: max_blocks_per_seq is
// ceil(longest / block_size) + 1. Splits are ceil(max_blocks / num_splits) blocks.
const auto kEmulatedCases = ::testing::Values(
    // 1000 keys, 64 blocks in 3 splits of 22 blocks (352 keys): the last split is partial, and the
    // shorter sequences (1 key, 517 keys) have one and two splits; the rest of theirs are empty.
    SplitCase{{1000, 1, 517}, 16, 1, 64, 3},
    // GQA 4 and 8, head_dim 128 (each thread owns one dim of the 128).
    SplitCase{{700, 300}, 16, 4, 128, 4}, SplitCase{{600}, 16, 8, 64, 5},
    // One split: the merge only divides by the sum.
    SplitCase{{777, 33}, 16, 4, 64, 1},
    // Many splits: 64 splits of 16 one-token blocks (the last one empty); then splits longer than
    // the kernel's 512-key chunk (2 splits of 672 keys).
    SplitCase{{1000, 999, 5}, 1, 1, 64, 64}, SplitCase{{1300, 1}, 16, 1, 64, 2},
    // Sequences of length 1 only, split in two (the second split is empty for both).
    SplitCase{{1, 1}, 1, 4, 64, 2},
    // head_dim 80 leaves threads idle; block_size 7 does not divide anything.
    SplitCase{{250, 97}, 7, 2, 80, 6},
    // A bf16 cache: the same loop, widening on load.
    SplitCase{{1000, 1, 517}, 16, 4, 64, 3, DType::kBF16});

INSTANTIATE_TEST_SUITE_P(Emulated, PagedAttentionSplitKvKernelTest,
                         ::testing::Combine(::testing::Values(Backend{
                                                "emulated", &PagedAttentionSplitKvEmulated,
                                                &testing::AlwaysAvailable}),
                                            kEmulatedCases),
                         KernelTestName);
#if BATON_HAS_CUDA
INSTANTIATE_TEST_SUITE_P(
    Cuda, PagedAttentionSplitKvKernelTest,
    ::testing::Combine(::testing::Values(Backend{"cuda", &testing::PagedAttentionSplitKvOnDevice,
                                                 &testing::CudaDeviceAvailable}),
                       ::testing::Values(SplitCase{{1000, 1, 517}, 16, 1, 64, 3},
                                         SplitCase{{8000, 4000, 1}, 16, 4, 128, 16},
                                         SplitCase{{32768}, 16, 8, 128, 64},
                                         SplitCase{{1000, 999, 5}, 1, 1, 64, 64},
                                         SplitCase{{1, 1}, 1, 4, 64, 2},
                                         SplitCase{{8000, 4000, 1}, 16, 4, 128, 16, DType::kBF16})),
    KernelTestName);
#endif

// ---- (c) invariants ----

// The split count moves the result by rounding only.
TEST(PagedAttentionSplitKvTest, SplitCountDoesNotChangeTheResult) {
  const SplitCase base{{900, 450, 1}, 16, 4, 64, 1};
  SplitProblem one(base, 5);
  ASSERT_THAT(PagedAttentionSplitKvEmulated(one.Params()), IsOk());
  for (int num_splits : {2, 7, 29, 57}) {
    SplitCase c = base;
    c.num_splits = num_splits;
    SplitProblem many(c, 5);
    ASSERT_THAT(PagedAttentionSplitKvEmulated(many.Params()), IsOk());
    EXPECT_TRUE(AllClose(many.out, one.out, ToleranceFor(DType::kF32)))
        << num_splits << " splits";
  }
}

TEST(PagedAttentionSplitKvTest, LargeScoresStayFinite) {
  SplitProblem problem({{900, 300}, 16, 2, 64, 4}, 13);
  for (float& x : problem.q) x *= 300.0f;  // scores in the hundreds; the splits' maxima differ
  const std::vector<float> expected = problem.Twin();
  ASSERT_THAT(PagedAttentionSplitKvEmulated(problem.Params()), IsOk());
  EXPECT_TRUE(AllFinite(problem.out));
  EXPECT_TRUE(AllClose(problem.out, expected, {.atol = 1e-4, .rtol = 1e-4}));
}

TEST(PagedAttentionSplitKvTest, RejectsBadSplitCounts) {
  SplitProblem problem({{40, 3}, 16, 4, 64, 2}, 17);  // max_blocks_per_seq = 4
  PagedAttentionSplitKvParams p = problem.Params();
  p.num_splits = 0;
  EXPECT_THAT(PagedAttentionSplitKvEmulated(p),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_splits = 0")));
  p.num_splits = 5;
  EXPECT_THAT(PagedAttentionSplitKvEmulated(p),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outside [1, 4]")));
  p = problem.Params();
  p.workspace = nullptr;
  EXPECT_THAT(PagedAttentionSplitKvEmulated(p),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("workspace is null")));
  p = problem.Params();
  p.attn.num_heads = 7;
  EXPECT_THAT(PagedAttentionSplitKvEmulated(p),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_kv_heads")));
  p = problem.Params();
  p.attn.cache.head_dim = 300;
  p.attn.cache.block_stride = int64_t{16} * kNumKvHeads * 300;
  p.attn.q_stride = 300 * p.attn.num_heads;
  EXPECT_THAT(PagedAttentionSplitKvEmulated(p),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("head_dim 300")));
}

}  // namespace
}  // namespace baton::kernels
