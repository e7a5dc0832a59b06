// SequenceConstraints: bitmasks filled on the helper thread (while a forward pass would run) are
// the ones filled on the engine thread, step after step, and a sequence can leave while a fill is
// in flight.
#include "runtime/structured_output/sequence_constraints.h"

#include <filesystem>
#include <thread>

#include "gtest/gtest.h"

namespace baton::runtime {
namespace {

constexpr int kVocabSize = 4096;
const std::vector<int32_t> kStopIds = {1, 4};

std::filesystem::path ModelDir() { return std::filesystem::path(BATON_TEST_SOURCE_DIR) / "models/kjv-4m"; }

const OutputConstraint kSchema{.kind = OutputConstraint::Kind::kJsonSchema,
                               .text = R"({"type": "object", "properties": {"a": {"type": "string"},
                                 "b": {"type": "array", "items": {"type": "integer"}}}, "required": ["a", "b"]})"};

// The n-th allowed token of `bitmask` (wrapping), not a stop token unless nothing else is allowed.
int32_t Pick(std::span<const int32_t> bitmask, int n) {
  std::vector<int32_t> allowed;
  for (int32_t id = 0; id < kVocabSize; ++id) {
    if (((bitmask[id / 32] >> (id % 32)) & 1) && id != kStopIds[0] && id != kStopIds[1]) allowed.push_back(id);
  }
  if (allowed.empty()) return kStopIds[1];
  return allowed[n % allowed.size()];
}

TEST(SequenceConstraintsTest, AsyncFillsAreTheSyncOnes) {
  SequenceConstraints async(ModelDir(), kVocabSize, kStopIds);
  SequenceConstraints sync(ModelDir(), kVocabSize, kStopIds);
  const std::vector<int64_t> ids = {7, 8, 9};
  for (int64_t id : ids) {
    ASSERT_TRUE(async.Add(id, kSchema, {}).ok());
    ASSERT_TRUE(sync.Add(id, kSchema, {}).ok());
  }
  for (int step = 0; step < 40; ++step) {
    std::vector<int64_t> live;
    for (int64_t id : ids) {
      if (!async.IsTerminated(id)) live.push_back(id);
    }
    if (live.empty()) break;
    const std::shared_ptr<const PendingFill> fill = async.FillBitmasksAsync(live);
    ASSERT_TRUE(fill->Wait().ok());
    for (int64_t id : live) {
      const std::span<const int32_t> expected = sync.NextTokenBitmask(id);
      const std::span<const int32_t> got = async.BitmaskOf(id);
      ASSERT_TRUE(std::equal(got.begin(), got.end(), expected.begin(), expected.end())) << "step " << step;
      const int32_t token = Pick(got, static_cast<int>(id) * 31 + step);
      ASSERT_TRUE(async.Accept(id, token).ok());
      ASSERT_TRUE(sync.Accept(id, token).ok());
    }
  }
}

TEST(SequenceConstraintsTest, ASequenceLeavesWhileItsFillIsInFlight) {
  SequenceConstraints constraints(ModelDir(), kVocabSize, kStopIds);
  ASSERT_TRUE(constraints.Add(1, kSchema, {}).ok());
  ASSERT_TRUE(constraints.Add(2, kSchema, {}).ok());
  const std::vector<int64_t> both = {1, 2};
  const std::shared_ptr<const PendingFill> fill = constraints.FillBitmasksAsync(both);
  constraints.Erase(1);  // waits for the fill first
  EXPECT_TRUE(fill->done());
  EXPECT_FALSE(constraints.Has(1));
  EXPECT_EQ(constraints.num_sequences(), 1);
}

TEST(SequenceConstraintsTest, PrecompileRunsOnAnyThread) {
  SequenceConstraints constraints(ModelDir(), kVocabSize, kStopIds);
  std::vector<absl::Status> results(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      results[t] = constraints.Precompile(
          t % 2 == 0 ? kSchema : OutputConstraint{.kind = OutputConstraint::Kind::kRegex, .text = "[a-z]{1,8}"});
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const absl::Status& result : results) EXPECT_TRUE(result.ok()) << result;
  EXPECT_TRUE(constraints.Add(1, kSchema, {}).ok());  // the engine thread's, from the cache
  EXPECT_EQ(constraints.Precompile({.kind = OutputConstraint::Kind::kRegex, .text = "(a"}).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace baton::runtime
