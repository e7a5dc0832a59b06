// The engine with a step in flight per pipeline stage (engine.h, "Steps in flight"): the same greedy
// tokens as one step at a time and as one rank, also under preemption, chunked prefill and
// requests arriving mid-run; the decodes shared out over the steps; a sequence cancelled while its
// step runs leaves when the step is done, its blocks with it.
#include <map>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/engine/engine.h"
#include "tests/testing/engine_requests.h"
#include "tests/testing/safetensors_writer.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using testing::Greedy;
using testing::Prompt;

using Tokens = std::map<SeqId, std::vector<int32_t>>;

struct EngineSetup {
  int pp = 1;
  int steps_in_flight = 0;  // 0: the engine's default, pp
  size_t kv_cache_bytes = 1 << 20;
  bool chunked = false;
};

class StepsInFlightTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_THAT(testing::WriteTinyModel(dir_.path(), testing::TinyEngineSpec()), IsOk());
  }

  std::unique_ptr<Engine> MakeEngine(const EngineSetup& setup) {
    auto engine = Engine::Create(EngineConfig{.model_dir = dir_.path(),
                                              .parallel = {.pp_size = setup.pp},
                                              .block_size = 4,
                                              .kv_cache_bytes = setup.kv_cache_bytes,
                                              .max_num_seqs = 16,
                                              .max_num_batched_tokens = setup.chunked ? 7 : 64,
                                              .chunked_prefill = setup.chunked,
                                              .max_model_len = 64,
                                              .max_steps_in_flight = setup.steps_in_flight});
    EXPECT_THAT(engine, IsOk());
    return engine.ok() ? std::move(*engine) : nullptr;
  }

  static Tokens Run(Engine& engine) { return testing::RunSixStaggeredRequests(engine); }

  testing::ScopedTempDir dir_;
};

TEST_F(StepsInFlightTest, SameTokensAsOneStepAtATimeAndAsOneRank) {
  // 2 layers x 2 (K, V) x 4 slots x 2 heads x 8 dims x 4 bytes = 1 KiB a block on one rank (half
  // of it on each of two stages); 20 blocks, 80 tokens, cannot hold six sequences of 17 to 37
  // tokens: preemption.
  for (size_t kv_cache_bytes : {size_t{1} << 20, size_t{20} << 10}) {
    for (bool chunked : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "kv " << kv_cache_bytes << (chunked ? " chunked" : ""));
      auto one_rank = MakeEngine({.kv_cache_bytes = kv_cache_bytes, .chunked = chunked});
      auto serial = MakeEngine({.pp = 2, .steps_in_flight = 1, .kv_cache_bytes = kv_cache_bytes,
                                .chunked = chunked});
      auto in_flight = MakeEngine({.pp = 2, .kv_cache_bytes = kv_cache_bytes, .chunked = chunked});
      ASSERT_NE(one_rank, nullptr);
      ASSERT_NE(serial, nullptr);
      ASSERT_NE(in_flight, nullptr);
      EXPECT_EQ(in_flight->max_steps_in_flight(), 2);
      EXPECT_EQ(serial->max_steps_in_flight(), 1);
      const Tokens expected = Run(*one_rank);
      ASSERT_EQ(expected.size(), 6u);
      for (SeqId id = 0; id < 6; ++id) EXPECT_EQ(expected.at(id).size(), 12u + id);
      EXPECT_EQ(Run(*serial), expected);
      EXPECT_EQ(Run(*in_flight), expected);
    }
  }
}

TEST_F(StepsInFlightTest, EachStepInFlightCarriesItsShareOfTheDecodes) {
  for (int steps_in_flight : {1, 2}) {
    auto engine = MakeEngine({.pp = 2, .steps_in_flight = steps_in_flight});
    ASSERT_NE(engine, nullptr);
    for (int i = 0; i < 4; ++i) ASSERT_THAT(engine->AddRequest(Prompt(6, i), Greedy(8)), IsOk());
    auto prefill = engine->Step();
    ASSERT_THAT(prefill, IsOk());
    EXPECT_EQ(prefill->size(), 4u);
    // Every later step decodes the whole batch, or half of it while the other half is in flight.
    std::map<SeqId, int> tokens;
    while (engine->HasWork()) {
      auto outputs = engine->Step();
      ASSERT_THAT(outputs, IsOk());
      EXPECT_EQ(outputs->size(), 4u / steps_in_flight);
      for (const TokenOutput& out : *outputs) ++tokens[out.seq_id];
    }
    for (SeqId id = 0; id < 4; ++id) EXPECT_EQ(tokens[id], 7);
  }
}

TEST_F(StepsInFlightTest, ASequenceCancelledInItsStepLeavesWhenTheStepIsDone) {
  auto engine = MakeEngine({.pp = 2});
  auto alone = MakeEngine({.pp = 2});
  ASSERT_NE(engine, nullptr);
  ASSERT_NE(alone, nullptr);
  const SeqId kept = *engine->AddRequest(Prompt(6, 0), Greedy(10));
  const SeqId cancelled = *engine->AddRequest(Prompt(9, 1), Greedy(10));
  const SeqId kept_alone = *alone->AddRequest(Prompt(6, 0), Greedy(10));
  Tokens tokens;
  auto step = [&] {
    auto outputs = engine->Step();
    ASSERT_THAT(outputs, IsOk());
    for (const TokenOutput& out : *outputs) tokens[out.seq_id].push_back(out.token_id);
  };
  step();  // the prefill of both
  step();  // the first decode step: one of the two; the other's step is still in flight
  ASSERT_EQ(tokens.at(kept).size() + tokens.at(cancelled).size(), 3u);
  if (tokens.at(cancelled).size() == 2) step();  // so that `cancelled` is the one in flight
  const int blocks_before = engine->allocator().num_blocks_used();
  ASSERT_THAT(engine->Cancel(cancelled), IsOk());
  EXPECT_THAT(engine->Cancel(cancelled), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(engine->allocator().num_blocks_used(), blocks_before) << "its step still writes them";
  const size_t cancelled_tokens = tokens.at(cancelled).size();
  while (engine->HasWork()) step();
  EXPECT_EQ(tokens.at(cancelled).size(), cancelled_tokens) << "no token after the cancel";
  EXPECT_EQ(engine->allocator().num_blocks_used(), 0);
  EXPECT_EQ(engine->num_sequences(), 0);
  Tokens expected;
  while (alone->HasWork()) {
    auto outputs = alone->Step();
    ASSERT_THAT(outputs, IsOk());
    for (const TokenOutput& out : *outputs) expected[out.seq_id].push_back(out.token_id);
  }
  EXPECT_EQ(tokens.at(kept), expected.at(kept_alone));
}

}  // namespace
}  // namespace baton::runtime
