#include "baton/kernels/token_bitmask.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/reference/random_tensor.h"
#include "kernels/simt/emulated_kernels.h"
#include "tests/testing/device_runners.h"
#include "tests/testing/kernel_backend.h"
#include "tests/testing/status_matchers.h"

namespace baton::kernels {
namespace {

using absl_testing::IsOk;
using absl_testing::StatusIs;
using reference::TestRng;
using ::testing::HasSubstr;

// A batch of logits rows, some of them masked by random bitmasks (the rest untouched).
struct Batch {
  int vocab_size = 0;
  int words = 0;
  std::vector<float> logits;
  std::vector<int32_t> bitmask;
  std::vector<int32_t> rows;

  TokenBitmaskParams Params() {
    return {.logits = logits.data(),
            .bitmask = bitmask.data(),
            .rows = rows.data(),
            .num_masked = static_cast<int>(rows.size()),
            .vocab_size = vocab_size,
            .bitmask_words = words};
  }
};

// `extra_words` pads each bitmask row past what the vocabulary needs (xgrammar's rows are sized
// for the tokenizer, which may be wider than needed): the padding is never read.
Batch RandomBatch(int vocab_size, int num_rows, uint64_t seed, int extra_words = 0) {
  TestRng rng(seed);
  Batch b;
  b.vocab_size = vocab_size;
  b.words = TokenBitmaskWordsFor(vocab_size) + extra_words;
  b.logits = reference::RandomVector(static_cast<int64_t>(num_rows) * vocab_size, seed, -8, 8);
  for (int r = 0; r < num_rows; ++r) {
    if (rng.UniformInt(0, 2) == 0) continue;  // a third of the rows unconstrained
    b.rows.push_back(r);
    const int density = static_cast<int>(rng.UniformInt(0, 3));  // none, sparse, half, all allowed
    for (int w = 0; w < b.words; ++w) {
      uint32_t word = 0;
      for (int bit = 0; bit < 32; ++bit) {
        const bool allowed = density == 3 || (density == 1 && rng.UniformInt(0, 15) == 0) ||
                             (density == 2 && rng.UniformInt(0, 1) == 0);
        word |= static_cast<uint32_t>(allowed) << bit;
      }
      b.bitmask.push_back(static_cast<int32_t>(word));
    }
  }
  return b;
}

// ---- (a) the CPU twin against the definition ----

TEST(TokenBitmaskCpuTest, DisallowedTokensBecomeMinusInfinityAndTheRestStay) {
  for (int vocab_size : {1, 31, 32, 33, 1000}) {
    Batch b = RandomBatch(vocab_size, 12, 40 + vocab_size, /*extra_words=*/vocab_size % 2);
    const std::vector<float> before = b.logits;
    ASSERT_THAT(TokenBitmaskCpu(b.Params()), IsOk());
    std::vector<int> mask_row(12, -1);
    for (size_t m = 0; m < b.rows.size(); ++m) mask_row[b.rows[m]] = static_cast<int>(m);
    for (int r = 0; r < 12; ++r) {
      for (int t = 0; t < vocab_size; ++t) {
        const int64_t i = int64_t{r} * vocab_size + t;
        const bool allowed =
            mask_row[r] < 0 || ((static_cast<uint32_t>(b.bitmask[mask_row[r] * b.words + t / 32]) >> (t % 32)) & 1);
        if (allowed) {
          ASSERT_EQ(b.logits[i], before[i]) << "row " << r << " token " << t;
        } else {
          ASSERT_EQ(b.logits[i], -INFINITY) << "row " << r << " token " << t;
        }
      }
    }
  }
}

TEST(TokenBitmaskCpuTest, RejectsBadParams) {
  Batch b = RandomBatch(64, 4, 1);
  TokenBitmaskParams p = b.Params();
  p.bitmask_words = 1;
  EXPECT_THAT(TokenBitmaskCpu(p), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bitmask_words")));
  p = b.Params();
  p.vocab_size = 0;
  EXPECT_THAT(TokenBitmaskCpu(p), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("vocab_size")));
  p = b.Params();
  p.rows = nullptr;
  p.num_masked = 1;
  EXPECT_THAT(TokenBitmaskCpu(p), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rows")));
  p.num_masked = 0;
  p.logits = nullptr;
  p.bitmask = nullptr;
  EXPECT_THAT(TokenBitmaskCpu(p), IsOk());
}

// ---- (b) the CUDA kernel (emulated, or on a GPU) against the CPU twin, bit for bit ----

using Backend = testing::KernelBackend<TokenBitmaskParams>;
class TokenBitmaskKernelTest : public ::testing::TestWithParam<std::tuple<Backend, int>> {};

TEST_P(TokenBitmaskKernelTest, GivesTheCpuLogitsBitForBit) {
  const auto [backend, vocab_size] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  Batch expected = RandomBatch(vocab_size, 9, 300 + vocab_size, /*extra_words=*/1);
  Batch b = expected;
  ASSERT_THAT(TokenBitmaskCpu(expected.Params()), IsOk());
  ASSERT_THAT(backend.run(b.Params()), IsOk());
  ASSERT_EQ(std::memcmp(b.logits.data(), expected.logits.data(), b.logits.size() * sizeof(float)), 0);
}

std::string KernelTestName(const ::testing::TestParamInfo<std::tuple<Backend, int>>& info) {
  return std::string(std::get<0>(info.param).name) + "_v" + std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    Emulated, TokenBitmaskKernelTest,
    ::testing::Combine(::testing::Values(Backend{"emulated", &TokenBitmaskEmulated, &testing::AlwaysAvailable}),
                       ::testing::Values(1, 33, 300, 1000)),
    KernelTestName);
#if BATON_HAS_CUDA
INSTANTIATE_TEST_SUITE_P(
    Cuda, TokenBitmaskKernelTest,
    ::testing::Combine(::testing::Values(Backend{"cuda", &testing::TokenBitmaskOnDevice, &testing::CudaDeviceAvailable}),
                       ::testing::Values(1, 33, 300, 1000, 128256)),
    KernelTestName);
#endif

}  // namespace
}  // namespace baton::kernels
