#include "baton/kernels/logits_processors.h"

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

// One sequence's history in the dense form a reader thinks in (what vLLM keeps as tensors).
struct DenseSeq {
  std::vector<int32_t> prompt;
  std::vector<int32_t> output;
  std::vector<std::pair<int32_t, float>> bias;
  std::vector<int32_t> stops;
  float repetition = 1, frequency = 0, presence = 0;
  int min_tokens = 0;
};

struct Batch {
  int vocab_size = 0;
  std::vector<float> logits;
  std::vector<LogitsTokenEntry> entries;
  std::vector<int32_t> offsets{0};
  std::vector<float> repetition, frequency, presence;
  std::vector<int32_t> num_generated, min_tokens;

  int num_seqs() const { return static_cast<int>(repetition.size()); }

  // The sparse entries of `seq`: one per token that anything applies to.
  void Add(const std::vector<float>& row, const DenseSeq& seq) {
    logits.insert(logits.end(), row.begin(), row.end());
    std::vector<LogitsTokenEntry> dense(vocab_size, LogitsTokenEntry{});
    std::vector<bool> used(vocab_size, false);
    for (int32_t t : seq.prompt) used[t] = true, dense[t].flags |= kLogitsTokenSeen;
    for (int32_t t : seq.output) used[t] = true, dense[t].flags |= kLogitsTokenSeen, ++dense[t].output_count;
    for (auto [t, b] : seq.bias) used[t] = true, dense[t].bias = b;
    for (int32_t t : seq.stops) used[t] = true, dense[t].flags |= kLogitsTokenStop;
    for (int t = vocab_size - 1; t >= 0; --t) {  // any order is fine; descending on purpose
      if (!used[t]) continue;
      dense[t].token_id = t;
      entries.push_back(dense[t]);
    }
    offsets.push_back(static_cast<int32_t>(entries.size()));
    repetition.push_back(seq.repetition);
    frequency.push_back(seq.frequency);
    presence.push_back(seq.presence);
    num_generated.push_back(static_cast<int32_t>(seq.output.size()));
    min_tokens.push_back(seq.min_tokens);
  }

  LogitsProcessorsParams Params() {
    return {.logits = logits.data(),
            .entries = entries.data(),
            .entry_offsets = offsets.data(),
            .repetition_penalty = repetition.data(),
            .frequency_penalty = frequency.data(),
            .presence_penalty = presence.data(),
            .num_generated = num_generated.data(),
            .min_tokens = min_tokens.data(),
            .num_seqs = num_seqs(),
            .vocab_size = vocab_size};
  }
};

DenseSeq RandomSeq(int vocab_size, TestRng& rng) {
  DenseSeq seq;
  const int prompt_len = static_cast<int>(rng.UniformInt(1, 40));
  const int output_len = static_cast<int>(rng.UniformInt(0, 30));
  // A narrow token range makes repeats (counts > 1) and prompt/output overlap common.
  const int range = static_cast<int>(std::min<int64_t>(vocab_size - 1, rng.UniformInt(3, 60)));
  for (int i = 0; i < prompt_len; ++i) seq.prompt.push_back(static_cast<int32_t>(rng.UniformInt(0, range)));
  for (int i = 0; i < output_len; ++i) seq.output.push_back(static_cast<int32_t>(rng.UniformInt(0, range)));
  for (int i = static_cast<int>(rng.UniformInt(0, 4)); i > 0; --i) {
    const int32_t t = static_cast<int32_t>(rng.UniformInt(0, vocab_size - 1));
    bool dup = false;
    for (auto [u, b] : seq.bias) dup = dup || u == t;
    if (!dup) seq.bias.push_back({t, rng.Uniform(-100, 100)});
  }
  if (rng.UniformInt(0, 1) == 1) seq.stops.push_back(static_cast<int32_t>(rng.UniformInt(0, vocab_size - 1)));
  const float kRepetition[] = {1.0f, 1.0f, 1.1f, 1.3f, 0.8f, 2.0f};
  const float kPenalty[] = {0.0f, 0.0f, 0.5f, -0.7f, 2.0f, -2.0f, 1.25f};
  seq.repetition = kRepetition[rng.UniformInt(0, 5)];
  seq.frequency = kPenalty[rng.UniformInt(0, 6)];
  seq.presence = kPenalty[rng.UniformInt(0, 6)];
  seq.min_tokens = static_cast<int>(rng.UniformInt(0, 40));
  return seq;
}

Batch RandomBatch(int vocab_size, int num_seqs, uint64_t seed) {
  TestRng rng(seed);
  Batch b;
  b.vocab_size = vocab_size;
  for (int s = 0; s < num_seqs; ++s) {
    std::vector<float> row = reference::RandomVector(vocab_size, seed * 131 + s, -8, 8);
    if (vocab_size > 3) row[rng.UniformInt(0, vocab_size - 1)] = 0.0f;  // the x > 0 boundary
    b.Add(row, RandomSeq(vocab_size, rng));
  }
  return b;
}

// vLLM's processors written over the whole row, as its sampler does on tensors.
std::vector<float> DenseReference(const std::vector<float>& row, const DenseSeq& seq) {
  std::vector<float> x = row;
  const int n = static_cast<int>(row.size());
  std::vector<int> count(n, 0);
  std::vector<bool> seen(n, false);
  for (int32_t t : seq.prompt) seen[t] = true;
  for (int32_t t : seq.output) seen[t] = true, ++count[t];
  if (static_cast<int>(seq.output.size()) < seq.min_tokens) {
    for (int32_t t : seq.stops) x[t] = -INFINITY;
  }
  for (auto [t, b] : seq.bias) x[t] += b;
  for (int i = 0; i < n; ++i) {
    if (seen[i]) x[i] = x[i] > 0 ? x[i] / seq.repetition : x[i] * seq.repetition;
    if (count[i] > 0) {
      // f32 product and difference as torch does, via double: frequency * count is exact in
      // double, and one rounding to f32 of the exact a - b*c equals fmaf.
      x[i] = static_cast<float>(double{x[i]} - double{seq.frequency} * count[i]);
      x[i] -= seq.presence;
    }
  }
  return x;
}

// ---- (a) the CPU twin against the dense reference ----

TEST(LogitsProcessorsCpuTest, MatchesTheDenseReference) {
  for (int vocab_size : {1, 5, 64, 1000}) {
    TestRng rng(vocab_size);
    Batch b;
    b.vocab_size = vocab_size;
    std::vector<DenseSeq> seqs;
    std::vector<std::vector<float>> rows;
    for (int s = 0; s < 50; ++s) {
      rows.push_back(reference::RandomVector(vocab_size, 900 + s, -8, 8));
      seqs.push_back(RandomSeq(vocab_size, rng));
      b.Add(rows.back(), seqs.back());
    }
    ASSERT_THAT(LogitsProcessorsCpu(b.Params()), IsOk());
    for (int s = 0; s < b.num_seqs(); ++s) {
      const std::vector<float> want = DenseReference(rows[s], seqs[s]);
      for (int i = 0; i < vocab_size; ++i) {
        ASSERT_EQ(b.logits[int64_t{s} * vocab_size + i], want[i])
            << "vocab " << vocab_size << " seq " << s << " token " << i;
      }
    }
  }
}

TEST(LogitsProcessorsCpuTest, EachProcessorDoesWhatItSays) {
  const LogitsTokenEntry plain{.token_id = 0, .output_count = 0, .bias = 0, .flags = 0};
  LogitsTokenEntry e = plain;
  e.bias = 2.5f;
  EXPECT_EQ(ProcessLogit(1.0f, e, 1, 0, 0, false), 3.5f);
  e = plain;
  e.flags = kLogitsTokenSeen;
  EXPECT_EQ(ProcessLogit(3.0f, e, 1.5f, 0, 0, false), 2.0f);    // positive: divided
  EXPECT_EQ(ProcessLogit(-3.0f, e, 1.5f, 0, 0, false), -4.5f);  // negative: multiplied
  e.output_count = 3;
  EXPECT_EQ(ProcessLogit(3.0f, e, 1.0f, 0.5f, 0.25f, false), 3.0f - 1.5f - 0.25f);
  e = plain;
  e.flags = kLogitsTokenStop;
  EXPECT_EQ(ProcessLogit(3.0f, e, 1, 0, 0, true), -INFINITY);
  EXPECT_EQ(ProcessLogit(3.0f, e, 1, 0, 0, false), 3.0f);
}

TEST(LogitsProcessorsCpuTest, RejectsBadParamsAndEntries) {
  Batch b = RandomBatch(10, 2, 1);
  LogitsProcessorsParams p = b.Params();
  p.vocab_size = 0;
  EXPECT_THAT(LogitsProcessorsCpu(p),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("vocab_size")));
  p = b.Params();
  p.presence_penalty = nullptr;
  EXPECT_THAT(LogitsProcessorsCpu(p),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("presence_penalty")));
  p.num_seqs = 0;
  p.logits = nullptr;
  EXPECT_THAT(LogitsProcessorsCpu(p), IsOk());

  const LogitsTokenEntry ok{.token_id = 3, .output_count = 1, .bias = 1, .flags = 0};
  EXPECT_THAT(ValidateLogitsEntries(0, &ok, 1, 1.0f, 10), IsOk());
  LogitsTokenEntry bad = ok;
  bad.token_id = 10;
  EXPECT_THAT(ValidateLogitsEntries(4, &bad, 1, 1.0f, 10),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sequence 4: token id 10")));
  const LogitsTokenEntry twice[] = {ok, ok};
  EXPECT_THAT(ValidateLogitsEntries(0, twice, 2, 1.0f, 10),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("twice")));
  EXPECT_THAT(ValidateLogitsEntries(0, &ok, 1, 0.0f, 10),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("repetition_penalty")));
}

// ---- (b) the CUDA kernel (emulated, or on a GPU) against the CPU twin, bit for bit ----

using Backend = testing::KernelBackend<LogitsProcessorsParams>;
class LogitsProcessorsKernelTest : public ::testing::TestWithParam<std::tuple<Backend, int>> {};

TEST_P(LogitsProcessorsKernelTest, GivesTheCpuLogitsBitForBit) {
  const auto [backend, vocab_size] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  Batch expected = RandomBatch(vocab_size, 40, 300 + vocab_size);
  Batch b = expected;
  ASSERT_THAT(LogitsProcessorsCpu(expected.Params()), IsOk());
  ASSERT_THAT(backend.run(b.Params()), IsOk());
  ASSERT_EQ(b.logits.size(), expected.logits.size());
  for (size_t i = 0; i < b.logits.size(); ++i) {
    uint32_t got, want;
    std::memcpy(&got, &b.logits[i], 4);
    std::memcpy(&want, &expected.logits[i], 4);
    ASSERT_EQ(got, want) << "element " << i << ": " << b.logits[i] << " vs " << expected.logits[i];
  }
}

// A batch whose sequences have no entries at all (null entries) leaves the logits alone.
TEST_P(LogitsProcessorsKernelTest, NoEntriesIsANoOp) {
  const auto [backend, vocab_size] = GetParam();
  if (!backend.available()) GTEST_SKIP() << "needs a CUDA device; none visible (no GPU or driver)";
  Batch b;
  b.vocab_size = vocab_size;
  b.Add(reference::RandomVector(vocab_size, 5, -3, 3), DenseSeq{});
  const std::vector<float> before = b.logits;
  LogitsProcessorsParams p = b.Params();
  p.entries = nullptr;
  ASSERT_THAT(backend.run(p), IsOk());
  EXPECT_EQ(b.logits, before);
}

std::string KernelTestName(const ::testing::TestParamInfo<std::tuple<Backend, int>>& info) {
  return std::string(std::get<0>(info.param).name) + "_v" + std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    Emulated, LogitsProcessorsKernelTest,
    ::testing::Combine(::testing::Values(Backend{"emulated", &LogitsProcessorsEmulated,
                                                 &testing::AlwaysAvailable}),
                       ::testing::Values(1, 7, 64, 1000)),
    KernelTestName);
#if BATON_HAS_CUDA
INSTANTIATE_TEST_SUITE_P(
    Cuda, LogitsProcessorsKernelTest,
    ::testing::Combine(::testing::Values(Backend{"cuda", &testing::LogitsProcessorsOnDevice,
                                                 &testing::CudaDeviceAvailable}),
                       ::testing::Values(1, 7, 64, 1000, 32000)),
    KernelTestName);
#endif

}  // namespace
}  // namespace baton::kernels
