#include "scheduler/planner/simulator.h"

#include <cmath>
#include <numeric>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/scheduler/planner/planner_test_util.h"

namespace baton::scheduler::planner {
namespace {

using testing::PoissonRequests;
using testing::TestCoefficients;
using testing::TestDevice;
using testing::TestModel;

double MeanTtft(const SimResult& result) {
  double sum = 0;
  for (const RequestTiming& t : result.requests) sum += t.ttft_s;
  return sum / result.requests.size();
}

SimPhase OneInstance(int max_num_seqs = 256) {
  return SimPhase{.parallelism = {1, 1}, .num_instances = 1, .max_num_seqs = max_num_seqs};
}

// One prefill instance serving one prompt at a time is an M/D/1 queue: service D = 100 ms, and the
// Pollaczek-Khinchine mean wait gives TTFT = D + lambda D^2 / (2 (1 - lambda D)).
TEST(SimulatorTest, PrefillQueueMatchesTheMD1ClosedForm) {
  const StepLatencyModel model(TestCoefficients({.b_ms = 1.0}, {.a_ms = 1.0}), TestModel(), TestDevice());
  const double service_s = 0.1;  // 100 tokens at 1 ms each
  for (double rate : {2.0, 5.0, 8.0}) {
    SCOPED_TRACE(rate);
    const std::vector<SimRequest> requests = PoissonRequests(200000, rate, 100, 1, /*seed=*/7);
    const SimDeployment deployment{.mode = SimMode::kPrefillOnly, .prefill = OneInstance(1)};
    absl::StatusOr<SimResult> result = Simulate(deployment, model, requests);
    ASSERT_TRUE(result.ok()) << result.status();
    const double rho = rate * service_s;
    const double expected = service_s + rate * service_s * service_s / (2 * (1 - rho));
    EXPECT_NEAR(MeanTtft(*result), expected, 0.03 * expected);
  }
}

// The runtime's prefill batching rule batches waiting prompts into one step: at the same load the
// mean TTFT falls below the one-at-a-time queue's when each step has a fixed cost to share.
TEST(SimulatorTest, PrefillBatchingSharesTheStepsFixedCost) {
  const StepLatencyModel model(TestCoefficients({.a_ms = 50, .b_ms = 0.5}, {.a_ms = 1.0}), TestModel(),
                               TestDevice());
  const std::vector<SimRequest> requests = PoissonRequests(5000, 8.0, 100, 1, 3);
  absl::StatusOr<SimResult> one = Simulate({.mode = SimMode::kPrefillOnly, .prefill = OneInstance(1)},
                                           model, requests);
  absl::StatusOr<SimResult> batched = Simulate(
      {.mode = SimMode::kPrefillOnly, .prefill = OneInstance(64)}, model, requests);
  ASSERT_TRUE(one.ok() && batched.ok());
  EXPECT_LT(MeanTtft(*batched), MeanTtft(*one));
}

// Decode alone: a lone request of n tokens takes n - 1 steps of a + c * 1 after its first token.
TEST(SimulatorTest, LoneDecodeRequestTakesOneStepPerToken) {
  const StepLatencyModel model(TestCoefficients({.b_ms = 1.0}, {.a_ms = 10, .b_ms = 0, .c_ms = 2}),
                               TestModel(), TestDevice());
  const std::vector<SimRequest> requests = {{.arrival_s = 0, .input_len = 50, .output_len = 11}};
  absl::StatusOr<SimResult> result =
      Simulate({.mode = SimMode::kDecodeOnly, .decode = OneInstance()}, model, requests);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_NEAR(result->requests[0].tpot_s, 0.012, 1e-12);
  EXPECT_EQ(result->num_steps, 10);
}

// A whole request through a disaggregated deployment: prefill step, KV transfer (bytes over the
// intra-node link), then decode steps.
TEST(SimulatorTest, DisaggregatedRequestPaysPrefillTransferAndDecode) {
  const ModelShape shape = TestModel();
  const StepLatencyModel model(TestCoefficients({.b_ms = 1.0}, {.a_ms = 10}), shape, TestDevice());
  const std::vector<SimRequest> requests = {{.arrival_s = 1.0, .input_len = 100, .output_len = 3}};
  const SimDeployment deployment{.mode = SimMode::kDisaggregated, .prefill = OneInstance(),
                                 .decode = OneInstance()};
  absl::StatusOr<SimResult> result = Simulate(deployment, model, requests);
  ASSERT_TRUE(result.ok()) << result.status();
  const double transfer_s = 100.0 * shape.KvBytesPerToken() / 1e9;
  EXPECT_NEAR(result->requests[0].ttft_s, 0.1, 1e-12);
  // Two decode steps after the first token, the first of them after the transfer.
  EXPECT_NEAR(result->requests[0].tpot_s, (transfer_s + 0.02) / 2, 1e-12);
  EXPECT_NEAR(result->requests[0].finish_s, 1.0 + 0.1 + transfer_s + 0.02, 1e-12);
}

// The serving slowdown: each step starts while the other instance is idle, so each runs at its
// phase's "alone" factor (prefill 1.5x, decode 2x).
TEST(SimulatorTest, ServingSlowdownScalesStepsByWhetherAnotherInstanceIsBusy) {
  LatencyCoefficients c = TestCoefficients({.b_ms = 1.0}, {.a_ms = 10});
  c.serving_slowdown = {.prefill_alone = 1.5, .prefill_shared = 3, .decode_alone = 2, .decode_shared = 4};
  const ModelShape shape = TestModel();
  const StepLatencyModel model(c, shape, TestDevice());
  const std::vector<SimRequest> requests = {{.arrival_s = 0, .input_len = 100, .output_len = 3},
                                            {.arrival_s = 0.2, .input_len = 10, .output_len = 1}};
  const SimDeployment deployment{.mode = SimMode::kDisaggregated, .prefill = OneInstance(),
                                 .decode = OneInstance()};
  absl::StatusOr<SimResult> result = Simulate(deployment, model, requests);
  ASSERT_TRUE(result.ok()) << result.status();
  const double transfer_s = 100.0 * shape.KvBytesPerToken() / 1e9;
  EXPECT_NEAR(result->requests[0].ttft_s, 0.15, 1e-12);
  EXPECT_NEAR(result->requests[0].tpot_s, (transfer_s + 0.04) / 2, 1e-12);
  // The first request's decode ended (at 0.19 + transfer < 0.2) before the second prompt arrived.
  EXPECT_NEAR(result->requests[1].ttft_s, 0.015, 1e-12);
  // Without a slowdown the same run gives the profiled times.
  const StepLatencyModel plain(TestCoefficients({.b_ms = 1.0}, {.a_ms = 10}), shape, TestDevice());
  absl::StatusOr<SimResult> base = Simulate(deployment, plain, requests);
  ASSERT_TRUE(base.ok());
  EXPECT_NEAR(base->requests[0].ttft_s, 0.1, 1e-12);
}

TEST(SimulatorTest, ServingSlowdownSharedAppliesBesideABusyInstance) {
  LatencyCoefficients c = TestCoefficients({.b_ms = 1.0}, {.a_ms = 10});
  c.serving_slowdown = {.prefill_alone = 1, .prefill_shared = 3, .decode_alone = 1, .decode_shared = 1};
  const StepLatencyModel model(c, TestModel(), TestDevice());
  // A long decode (200 steps of 10 ms) is under way when the second prompt arrives.
  const std::vector<SimRequest> requests = {{.arrival_s = 0, .input_len = 10, .output_len = 200},
                                            {.arrival_s = 0.5, .input_len = 100, .output_len = 1}};
  const SimDeployment deployment{.mode = SimMode::kDisaggregated, .prefill = OneInstance(),
                                 .decode = OneInstance()};
  absl::StatusOr<SimResult> result = Simulate(deployment, model, requests);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_NEAR(result->requests[0].ttft_s, 0.01, 1e-12);
  EXPECT_NEAR(result->requests[1].ttft_s, 0.3, 1e-12);
}

// Routing is the runtime's: two prompts arriving together go to the two prefill instances
// (fewest outstanding prefill tokens), so neither waits for the other.
TEST(SimulatorTest, RoutingSpreadsPromptsOverPrefillInstances) {
  const StepLatencyModel model(TestCoefficients({.b_ms = 1.0}, {.a_ms = 1}), TestModel(), TestDevice());
  const std::vector<SimRequest> requests = {{.arrival_s = 0, .input_len = 100, .output_len = 1},
                                            {.arrival_s = 0, .input_len = 100, .output_len = 1}};
  SimPhase two = OneInstance(1);
  two.num_instances = 2;
  absl::StatusOr<SimResult> result = Simulate({.mode = SimMode::kPrefillOnly, .prefill = two}, model, requests);
  ASSERT_TRUE(result.ok());
  EXPECT_NEAR(result->requests[0].ttft_s, 0.1, 1e-12);
  EXPECT_NEAR(result->requests[1].ttft_s, 0.1, 1e-12);
}

// Pull-based backpressure: a decode instance with room for one request's KV pulls the second only
// after the first finished; the prefill instance holds the second's KV meanwhile.
TEST(SimulatorTest, FullDecodeInstanceDelaysThePull) {
  const StepLatencyModel model(TestCoefficients({.b_ms = 1.0}, {.a_ms = 10}), TestModel(), TestDevice());
  const std::vector<SimRequest> requests = {{.arrival_s = 0, .input_len = 100, .output_len = 21},
                                            {.arrival_s = 0, .input_len = 100, .output_len = 21}};
  SimPhase decode = OneInstance();
  decode.kv_capacity_tokens = 128;  // 8 blocks: one request of 100 + 20 tokens
  absl::StatusOr<SimResult> result = Simulate(
      {.mode = SimMode::kDisaggregated, .prefill = OneInstance(), .decode = decode}, model, requests);
  ASSERT_TRUE(result.ok()) << result.status();
  // Both prompts share one prefill step; the second's 20 decode steps (0.2 s) start only once the
  // first request finished and freed its blocks.
  EXPECT_NEAR(result->requests[1].ttft_s, result->requests[0].ttft_s, 1e-12);
  EXPECT_GE(result->requests[1].finish_s, result->requests[0].finish_s + 0.2);
}

// Swap space: two decoding requests of 16 + 2 tokens on 3 blocks of 16. The first step's decode
// of A takes the last free block, so B is swapped out (its one block, on the host link) and waits
// until A has finished; it comes back with its block and the one its next token needs, and the
// step that brings it back pays the copy in before decoding.
TEST(SimulatorTest, SwappedOutSequenceWaitsAndPaysBothCopies) {
  const ModelShape shape = TestModel();
  const StepLatencyModel model(TestCoefficients({.b_ms = 1.0}, {.a_ms = 10}), shape, TestDevice());
  const std::vector<SimRequest> requests(2, SimRequest{.arrival_s = 0, .input_len = 16, .output_len = 3});
  SimPhase decode = OneInstance();
  decode.kv_capacity_tokens = 48;
  decode.swap_capacity_tokens = 16;
  absl::StatusOr<SimResult> result = Simulate({.mode = SimMode::kDecodeOnly, .decode = decode}, model, requests);
  ASSERT_TRUE(result.ok()) << result.status();
  const double swap_s = 16.0 * shape.KvBytesPerToken() / 5e8;
  EXPECT_EQ(result->num_preemptions, 0);
  EXPECT_EQ(result->num_swapped_blocks, 1);
  EXPECT_EQ(result->num_steps, 4);
  EXPECT_NEAR(result->requests[0].finish_s, swap_s + 0.02, 1e-12);  // step 1 paid the copy out
  EXPECT_NEAR(result->requests[1].finish_s, 2 * swap_s + 0.04, 1e-12);
  // Without swap space B loses its KV and is computed again: a preemption, no copy.
  decode.swap_capacity_tokens = 0;
  result = Simulate({.mode = SimMode::kDecodeOnly, .decode = decode}, model, requests);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->num_preemptions, 1);
  EXPECT_EQ(result->num_swapped_blocks, 0);
  EXPECT_NEAR(result->requests[0].finish_s, 0.02, 1e-12);
}

// Pipeline stages: 4 decoding sequences on pp = 2 go as 2 steps in flight of 2 sequences (the
// engine's share per step), each one micro-batch, each stage taking half the pass (a + 2c) / 2:
// the first step is done after 2 stage-slots, the second, which entered stage 0 as the first left
// it, after 3. One step at a time in 2 micro-batches would give every sequence 3.
TEST(SimulatorTest, PipelineStagesRunAStepInFlightEach) {
  const StepLatencyModel model(TestCoefficients({.b_ms = 1.0}, {.a_ms = 8, .c_ms = 1}), TestModel(),
                               TestDevice());
  std::vector<SimRequest> requests(4, SimRequest{.arrival_s = 0, .input_len = 16, .output_len = 2});
  SimPhase decode = OneInstance();
  decode.parallelism = {1, 2};
  absl::StatusOr<SimResult> result = Simulate({.mode = SimMode::kDecodeOnly, .decode = decode}, model, requests);
  ASSERT_TRUE(result.ok()) << result.status();
  // The stage link adds (2 tokens x hidden x 2 bytes) / 1 GB/s per micro-batch and stage.
  const double send_ms = 2.0 * 1024 * 2 / 1e9 * 1e3;
  const double stage_ms = (8 + 2 * 1) / 2.0 + send_ms;
  EXPECT_EQ(result->num_steps, 2);
  for (int r : {0, 1}) EXPECT_NEAR(result->requests[r].tpot_s, 2 * stage_ms / 1e3, 1e-9);
  for (int r : {2, 3}) EXPECT_NEAR(result->requests[r].tpot_s, 3 * stage_ms / 1e3, 1e-9);
}

TEST(SimulatorTest, SameInputGivesTheSameResult) {
  const StepLatencyModel model(TestCoefficients({.a_ms = 5, .b_ms = 0.2, .c_ms = 1e-5}, {.a_ms = 10, .b_ms = 1e-3, .c_ms = 0.1}),
                               TestModel(), TestDevice());
  const std::vector<SimRequest> requests = PoissonRequests(2000, 20, 300, 50, 11);
  SimPhase prefill = OneInstance();
  prefill.num_instances = 2;
  const SimDeployment deployment{.mode = SimMode::kDisaggregated, .prefill = prefill, .decode = OneInstance()};
  absl::StatusOr<SimResult> a = Simulate(deployment, model, requests);
  absl::StatusOr<SimResult> b = Simulate(deployment, model, requests);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->requests.size(), b->requests.size());
  for (size_t i = 0; i < a->requests.size(); ++i) {
    EXPECT_EQ(a->requests[i].ttft_s, b->requests[i].ttft_s);
    EXPECT_EQ(a->requests[i].finish_s, b->requests[i].finish_s);
  }
}

TEST(SimulatorTest, ColocatedChunkedPrefillKeepsDecodingDuringALongPrompt) {
  const StepLatencyModel model(TestCoefficients({.a_ms = 5, .b_ms = 1.0}, {.a_ms = 5, .c_ms = 0.1}),
                               TestModel(), TestDevice());
  const std::vector<SimRequest> requests = {{.arrival_s = 0, .input_len = 16, .output_len = 40},
                                            {.arrival_s = 0.05, .input_len = 2000, .output_len = 2}};
  SimPhase whole = OneInstance();
  SimPhase chunked = OneInstance();
  chunked.chunked_prefill = true;
  chunked.max_num_batched_tokens = 256;
  absl::StatusOr<SimResult> a = Simulate({.mode = SimMode::kColocated, .colocated_phase = whole}, model, requests);
  absl::StatusOr<SimResult> b = Simulate({.mode = SimMode::kColocated, .colocated_phase = chunked}, model, requests);
  ASSERT_TRUE(a.ok() && b.ok());
  // The 2-second prompt stalls the first request's decode once without chunks; chunks of 256
  // tokens cost at most ~0.26 s each.
  EXPECT_GT(a->requests[0].tpot_s * 39, 2.0);
  EXPECT_LT(b->requests[0].tpot_s, a->requests[0].tpot_s);
}

TEST(SimulatorTest, RejectsBadInput) {
  const StepLatencyModel model(TestCoefficients({.b_ms = 1.0}, {.a_ms = 1}), TestModel(), TestDevice());
  const std::vector<SimRequest> ok = {{.arrival_s = 0, .input_len = 10, .output_len = 1}};
  EXPECT_EQ(Simulate({.mode = SimMode::kPrefillOnly, .prefill = OneInstance()}, model, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  SimPhase none = OneInstance();
  none.num_instances = 0;
  EXPECT_EQ(Simulate({.mode = SimMode::kPrefillOnly, .prefill = none}, model, ok).status().code(),
            absl::StatusCode::kInvalidArgument);
  SimPhase tp3 = OneInstance();
  tp3.parallelism = {3, 1};  // no coefficients for tp 3
  EXPECT_EQ(Simulate({.mode = SimMode::kPrefillOnly, .prefill = tp3}, model, ok).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<SimRequest> unsorted = {{.arrival_s = 1, .input_len = 10, .output_len = 1},
                                            {.arrival_s = 0, .input_len = 10, .output_len = 1}};
  EXPECT_EQ(Simulate({.mode = SimMode::kPrefillOnly, .prefill = OneInstance()}, model, unsorted).status().code(),
            absl::StatusCode::kInvalidArgument);
  SimPhase tiny = OneInstance();
  tiny.kv_capacity_tokens = 16;
  const std::vector<SimRequest> big = {{.arrival_s = 0, .input_len = 100, .output_len = 1}};
  EXPECT_EQ(Simulate({.mode = SimMode::kPrefillOnly, .prefill = tiny}, model, big).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Prefix caching runs the runtime's prefix cache over the requests' tokens: a prompt repeated after
// the first computes only its last block (b = 1 ms a prompt token), and the hits are counted.
TEST(SimulatorTest, PrefixCachingComputesOnlyWhatFollowsTheCachedPrefix) {
  const StepLatencyModel model(TestCoefficients({.b_ms = 1.0}, {.a_ms = 1.0}), TestModel(), TestDevice());
  std::vector<int32_t> prompt(160);
  std::iota(prompt.begin(), prompt.end(), 7);
  const std::vector<SimRequest> requests = {{.arrival_s = 0, .input_len = 160, .output_len = 1, .prompt_ids = prompt},
                                            {.arrival_s = 1, .input_len = 160, .output_len = 1, .prompt_ids = prompt}};
  for (bool caching : {false, true}) {
    SCOPED_TRACE(caching);
    absl::StatusOr<SimResult> result = Simulate(
        {.mode = SimMode::kPrefillOnly, .prefill = OneInstance(), .prefix_caching = caching}, model, requests);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_NEAR(result->requests[0].ttft_s, 0.160, 1e-9);
    EXPECT_NEAR(result->requests[1].ttft_s, caching ? 0.016 : 0.160, 1e-9);
    EXPECT_EQ(result->num_prompt_tokens, 320);
    EXPECT_EQ(result->num_cached_tokens, caching ? 144 : 0);
  }
}

// Requests without token content share nothing, whatever their lengths.
TEST(SimulatorTest, PromptsWithoutTokensShareNoPrefix) {
  const StepLatencyModel model(TestCoefficients({.b_ms = 1.0}, {.a_ms = 1.0}), TestModel(), TestDevice());
  absl::StatusOr<SimResult> result =
      Simulate({.mode = SimMode::kPrefillOnly, .prefill = OneInstance(), .prefix_caching = true}, model,
               PoissonRequests(200, 2.0, 100, 1, 5));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->num_cached_tokens, 0);
}

// A session's turn is sent think_s after the previous one finished, and its prompt (history +
// message) finds the history in the colocated instance's cache: prompt and answer alike.
TEST(SimulatorTest, ASessionsTurnsFollowEachOtherAndReuseTheirHistory) {
  const StepLatencyModel model(TestCoefficients({.b_ms = 1.0}, {.a_ms = 1.0, .c_ms = 0}), TestModel(),
                               TestDevice());
  const std::vector<SimRequest> requests = {
      {.arrival_s = 0.5, .input_len = 64, .output_len = 17, .session = 0, .turn = 0, .think_s = 2},
      {.input_len = 64 + 17 + 32, .output_len = 5, .session = 0, .turn = 1, .think_s = 2}};
  absl::StatusOr<SimResult> result = Simulate(
      {.mode = SimMode::kColocated, .colocated_phase = OneInstance(), .prefix_caching = true}, model, requests);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_NEAR(result->requests[1].arrival_s, result->requests[0].finish_s + 2, 1e-9);
  // Turn 0 computed 64 + 16 tokens (its last answer token is never fed): 5 full blocks for turn 1.
  EXPECT_EQ(result->num_cached_tokens, 80);
  EXPECT_NEAR(result->requests[1].ttft_s, 0.001 * (113 - 80), 1e-9);
}

TEST(SimulatorTest, ATurnOutOfItsSessionsOrderIsRefused) {
  const StepLatencyModel model(TestCoefficients({.b_ms = 1.0}, {.a_ms = 1.0}), TestModel(), TestDevice());
  const std::vector<SimRequest> requests = {{.input_len = 8, .output_len = 1, .session = 0, .turn = 1}};
  EXPECT_EQ(Simulate({.mode = SimMode::kColocated, .colocated_phase = OneInstance()}, model, requests).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace baton::scheduler::planner
