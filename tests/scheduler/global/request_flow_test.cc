// Table-driven tests of a request's flow (scheduler/global/request_flow.h) against a scripted
// FakeWorkerClient, in the manner of TensorRT-LLM's batch manager tests: each row scripts the
// workers, and states what the client sees, which states the flow went through, which calls the
// workers got (in order), and what the registry knows afterwards. No process, no socket.
#include "scheduler/global/request_flow.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <thread>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/worker/worker_draining.h"
#include "scheduler/global/latency_model.h"
#include "scheduler/global/worker_registry.h"
#include "tests/runtime/tokenizer/tokenizer_test_util.h"
#include "tests/scheduler/global/fake_worker_client.h"
#include "tests/testing/status_matchers.h"

namespace baton::scheduler {
namespace {

using absl_testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::DecodeScript;
using testing::FakeWorkerClient;
using testing::PrefillScript;
using FS = FlowState;
using runtime::FinishReason;

// The test tokenizer is byte-level: token id = byte value, so 'A' decodes to "A".
constexpr int32_t kPromptA = 'h', kPromptB = 'i';

// A hand-off from a prefill instance of two tensor-parallel ranks.
runtime::KvHandoff Handoff() {
  return runtime::KvHandoff{
      .model_shape = {.num_layers = 2, .num_kv_heads = 2, .head_dim = 8, .block_size = 4},
      .layout = {.tp_size = 2, .pp_size = 1},
      .rank_sources = {{.hostname = "h", .shm_name = "/kv-0", .tcp_address = "h:1"},
                       {.hostname = "h", .shm_name = "/kv-1", .tcp_address = "h:2"}},
      .blocks = {7},
      .num_tokens = 2};
}

PrefillResult FirstToken(int32_t id, FinishReason finish = FinishReason::kNone) {
  return PrefillResult{.first_token_id = id,
                       .finish_reason = finish,
                       .kv = Handoff(),
                       .prefill_start_us = 1000,
                       .prefill_end_us = 2000};
}
DecodeEvent Kv() { return KvTransferred{.start_us = 2100, .end_us = 2200, .num_bytes = 64}; }
DecodeEvent Tokens(std::string text, int64_t first_emit_us,
                   FinishReason finish = FinishReason::kNone) {
  TokenChunk chunk{.finish_reason = finish};
  for (size_t i = 0; i < text.size(); ++i) {
    chunk.token_ids.push_back(static_cast<unsigned char>(text[i]));
    chunk.emit_us.push_back(first_emit_us + 1000 * static_cast<int64_t>(i));
  }
  return chunk;
}

struct Case {
  std::string name;
  bool disaggregated = true;
  bool prefill_live = true;
  bool decode_live = true;
  int decode_free_blocks = 100;  // from d0's last heartbeat
  PrefillScript prefill;
  DecodeScript decode;
  std::vector<std::string> stop_strings;
  std::optional<int> client_gone_at_chunk;  // the sink fails on this chunk (0-based)

  absl::StatusCode want_code = absl::StatusCode::kOk;
  std::string want_message = "";
  std::vector<FlowState> want_states;
  std::vector<std::string> want_log;
  std::string want_text = "";
  FinishReason want_finish = FinishReason::kNone;  // of the last chunk written
  std::vector<std::string> want_dead;              // incarnations marked dead
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class RequestFlowTest : public ::testing::TestWithParam<Case> {};

TEST_P(RequestFlowTest, Runs) {
  const Case& c = GetParam();
  auto tokenizer = runtime::testing::LoadTokenizer(runtime::testing::Gpt2StyleJson());
  ASSERT_NE(tokenizer, nullptr);
  WorkerRegistry registry({}, absl::Seconds(10));
  const absl::Time now = absl::Now();
  auto add = [&](WorkerRole role, const std::string& id, bool live, int free_blocks) {
    registry.Register({.role = role, .instance_idx = 0, .incarnation_id = id, .address = id}, now);
    registry.Heartbeat(id, {.num_kv_blocks_total = free_blocks}, now);
    if (!live) registry.MarkDead(id, "down before the request");
  };
  if (c.disaggregated) {
    add(WorkerRole::kPrefill, "p0", c.prefill_live, 100);
    add(WorkerRole::kDecode, "d0", c.decode_live, c.decode_free_blocks);
  } else {
    add(WorkerRole::kColocated, "c0", c.decode_live, 100);
  }
  FakeWorkerClient workers;
  workers.SetPrefill("p0", c.prefill);
  workers.SetDecode(c.disaggregated ? "d0" : "c0", c.decode);
  LatencyModel latency;

  std::vector<GenerateChunk> chunks;
  PreparedRequest prepared{.request = {.request_id = "req-1", .stop_strings = c.stop_strings},
                           .prompt = {kPromptA, kPromptB},
                           .arrival_us = 500};
  prepared.request.params.max_tokens = 8;
  RequestFlow flow(RequestFlowParams{.tokenizer = tokenizer.get(),
                                     .registry = &registry,
                                     .latency_model = &latency,
                                     .workers = &workers,
                                     .disaggregated = c.disaggregated,
                                     .worker_wait = absl::ZeroDuration(),
                                     .write =
                                         [&](const GenerateChunk& chunk) {
                                           if (c.client_gone_at_chunk == chunks.size()) return false;
                                           chunks.push_back(chunk);
                                           return true;
                                         },
                                     .is_cancelled = [&] { return workers.client_cancelled(); }},
                   std::move(prepared));

  const absl::Status status = flow.Run();

  EXPECT_THAT(status, StatusIs(c.want_code, HasSubstr(c.want_message)));
  EXPECT_THAT(flow.trace(), ElementsAreArray(c.want_states));
  EXPECT_EQ(flow.state(), c.want_states.back());
  EXPECT_THAT(workers.log(), ElementsAreArray(c.want_log));
  std::string text;
  for (const GenerateChunk& chunk : chunks) text += chunk.text;
  EXPECT_EQ(text, c.want_text);
  if (!chunks.empty()) {
    EXPECT_EQ(chunks.back().finish_reason, c.want_finish);
  }
  // The KV lease is released at most once, and only for this request.
  EXPECT_LE(workers.released().size(), 1u);
  for (const std::string& id : workers.released()) EXPECT_EQ(id, "req-1");
  // Liveness: exactly the instances the row names died.
  for (const std::string id : {"p0", "d0", "c0"}) {
    const bool dead = std::find(c.want_dead.begin(), c.want_dead.end(), id) != c.want_dead.end();
    const bool was_down = (id == std::string("p0") && !c.prefill_live) ||
                          (id != std::string("p0") && !c.decode_live);
    const std::optional<InstanceLoad> load = registry.LoadOf(WorkerRef{.incarnation_id = id});
    if (dead) {
      EXPECT_FALSE(load.has_value()) << id << " should be dead";
    }
    // The scheduler's accounting is back to zero on every path.
    if (load) {
      EXPECT_FALSE(dead || was_down) << id;
      EXPECT_EQ(load->outstanding_prefill_tokens, 0) << id;
      EXPECT_EQ(load->num_active_requests, 0) << id;
    }
  }
}

const std::vector<std::string> kHappyLog = {"Prefill p0", "Decode d0", "kv", "Release p0",
                                            "tokens", "tokens"};

INSTANTIATE_TEST_SUITE_P(
    Table, RequestFlowTest,
    ::testing::Values(
        // --- finishing ---------------------------------------------------------------------------
        Case{.name = "FinishOnLength_KvReleasedOnceAfterThePull",
             .prefill = {.result = FirstToken('A')},
             .decode = {.events = {Kv(), Tokens("B", 3000), Tokens("C", 4000, FinishReason::kLength)}},
             .want_states = {FS::kPrefilling, FS::kHandingOff, FS::kDecoding, FS::kFinished},
             .want_log = kHappyLog,
             .want_text = "ABC",
             .want_finish = FinishReason::kLength},
        Case{.name = "FirstTokenFinishes_NothingToDecodeOrRelease",
             .prefill = {.result = FirstToken('A', FinishReason::kLength)},
             .want_states = {FS::kPrefilling, FS::kFinished},
             .want_log = {"Prefill p0"},
             .want_text = "A",
             .want_finish = FinishReason::kLength},
        Case{.name = "StopStringInTheFirstToken_ReleasesTheHeldKv",
             .prefill = {.result = FirstToken('A')},
             .stop_strings = {"A"},
             .want_states = {FS::kPrefilling, FS::kFinished},
             .want_log = {"Prefill p0", "Release p0"},
             .want_text = "",
             .want_finish = FinishReason::kStop},
        Case{.name = "StopStringMidStream_StopsReadingTheStream",
             .prefill = {.result = FirstToken('A')},
             .decode = {.events = {Kv(), Tokens("BC", 3000), Tokens("D", 5000),
                                   Tokens("E", 6000, FinishReason::kLength)}},
             .stop_strings = {"CD"},
             .want_states = {FS::kPrefilling, FS::kHandingOff, FS::kDecoding, FS::kFinished},
             .want_log = {"Prefill p0", "Decode d0", "kv", "Release p0", "tokens", "tokens"},
             .want_text = "AB",
             .want_finish = FinishReason::kStop},
        Case{.name = "StreamEndsWithoutFinishReason",
             .prefill = {.result = FirstToken('A')},
             .decode = {.events = {Kv(), Tokens("B", 3000)}},
             .want_code = absl::StatusCode::kInternal,
             .want_message = "decode stream ended without a finish reason",
             .want_states = {FS::kPrefilling, FS::kHandingOff, FS::kDecoding, FS::kFailed},
             .want_log = {"Prefill p0", "Decode d0", "kv", "Release p0", "tokens"},
             .want_text = "AB"},
        // --- backpressure --------------------------------------------------------------------------
        Case{.name = "DecodeFull_StillRoutedThere_KvHeldUntilItPulls",
             .decode_free_blocks = 0,
             .prefill = {.result = FirstToken('A')},
             .decode = {.events = {Kv(), Tokens("B", 3000, FinishReason::kLength)}},
             .want_states = {FS::kPrefilling, FS::kHandingOff, FS::kDecoding, FS::kFinished},
             .want_log = {"Prefill p0", "Decode d0", "kv", "Release p0", "tokens"},
             .want_text = "AB",
             .want_finish = FinishReason::kLength},
        // --- no instance ---------------------------------------------------------------------------
        Case{.name = "NoLivePrefillWorker",
             .prefill_live = false,
             .want_code = absl::StatusCode::kUnavailable,
             .want_message = "no live prefill worker",
             .want_states = {FS::kPrefilling, FS::kFailed},
             .want_log = {}},
        Case{.name = "NoLiveDecodeWorker_ReleasesTheKv",
             .decode_live = false,
             .prefill = {.result = FirstToken('A')},
             .want_code = absl::StatusCode::kUnavailable,
             .want_message = "no live decode worker",
             .want_states = {FS::kPrefilling, FS::kHandingOff, FS::kFailed},
             .want_log = {"Prefill p0", "Release p0"},
             .want_text = "A"},
        // --- a worker dies at each stage -----------------------------------------------------------
        Case{.name = "PrefillUnreachable_MarkedDead_NoOtherInstance",
             .prefill = {.result = absl::UnavailableError("failed to connect to all addresses")},
             .want_code = absl::StatusCode::kUnavailable,
             .want_message = "no live prefill worker (waited 0) after prefill worker 0 failed: "
                             "failed to connect to all addresses",
             .want_states = {FS::kPrefilling, FS::kFailed},
             .want_log = {"Prefill p0"},
             .want_dead = {"p0"}},
        Case{.name = "PrefillDraining_NotMarkedDead",
             .prefill = {.result = runtime::WorkerDrainingError()},
             .want_code = absl::StatusCode::kUnavailable,
             .want_message = "worker is draining",
             .want_states = {FS::kPrefilling, FS::kFailed},
             .want_log = {"Prefill p0"}},
        Case{.name = "PrefillOtherError_PassedThrough",
             .prefill = {.result = absl::ResourceExhaustedError("request 7: 900 blocks needed")},
             .want_code = absl::StatusCode::kResourceExhausted,
             .want_message = "900 blocks needed",
             .want_states = {FS::kPrefilling, FS::kFailed},
             .want_log = {"Prefill p0"}},
        Case{.name = "DecodeDiesBeforeKvTransfer_MarkedDead_NoOtherInstance_KvReleased",
             .prefill = {.result = FirstToken('A')},
             .decode = {.end_status = absl::UnavailableError("Socket closed")},
             .want_code = absl::StatusCode::kUnavailable,
             .want_message = "no live decode worker (waited 0) after decode worker 0 failed: Socket closed",
             .want_states = {FS::kPrefilling, FS::kHandingOff, FS::kFailed},
             .want_log = {"Prefill p0", "Decode d0", "Release p0"},
             .want_text = "A",
             .want_dead = {"d0"}},
        // --- the client cancels at each stage --------------------------------------------------------
        // The prefill may have finished on the worker as the call was cancelled (its answer lost):
        // the worker is told that no KV is wanted.
        Case{.name = "ClientCancelsDuringPrefill_KvNotWanted",
             .prefill = {.client_cancels_during = true},
             .want_code = absl::StatusCode::kCancelled,
             .want_states = {FS::kPrefilling, FS::kCancelled},
             .want_log = {"Prefill p0", "Release p0"}},
        Case{.name = "ClientCancelsAfterPrefill_KvReleasedNoDecode",
             .prefill = {.result = FirstToken('A'), .client_cancels_after = true},
             .want_code = absl::StatusCode::kCancelled,
             .want_message = "client cancelled",
             .want_states = {FS::kPrefilling, FS::kCancelled},
             .want_log = {"Prefill p0", "Release p0"},
             .want_text = "A"},
        Case{.name = "ClientGoneAtTheFirstToken_KvReleased",
             .prefill = {.result = FirstToken('A')},
             .client_gone_at_chunk = 0,
             .want_code = absl::StatusCode::kCancelled,
             .want_message = "client gone",
             .want_states = {FS::kPrefilling, FS::kCancelled},
             .want_log = {"Prefill p0", "Release p0"}},
        Case{.name = "ClientCancelsDuringHandOff_KvReleased",
             .prefill = {.result = FirstToken('A')},
             .decode = {.events = {Kv()}, .client_cancels_before = 0},
             .want_code = absl::StatusCode::kCancelled,
             .want_message = "client cancelled",
             .want_states = {FS::kPrefilling, FS::kHandingOff, FS::kCancelled},
             .want_log = {"Prefill p0", "Decode d0", "Release p0"},
             .want_text = "A"},
        Case{.name = "ClientCancelsMidStream",
             .prefill = {.result = FirstToken('A')},
             .decode = {.events = {Kv(), Tokens("B", 3000), Tokens("C", 4000)},
                        .client_cancels_before = 2},
             .want_code = absl::StatusCode::kCancelled,
             .want_message = "client cancelled",
             .want_states = {FS::kPrefilling, FS::kHandingOff, FS::kDecoding, FS::kCancelled},
             .want_log = {"Prefill p0", "Decode d0", "kv", "Release p0", "tokens"},
             .want_text = "AB"},
        Case{.name = "ClientGoneMidStream_StreamCancelled",
             .prefill = {.result = FirstToken('A')},
             .decode = {.events = {Kv(), Tokens("B", 3000), Tokens("C", 4000)}},
             .client_gone_at_chunk = 1,
             .want_code = absl::StatusCode::kCancelled,
             .want_message = "client cancelled",
             .want_states = {FS::kPrefilling, FS::kHandingOff, FS::kDecoding, FS::kCancelled},
             .want_log = {"Prefill p0", "Decode d0", "kv", "Release p0", "tokens"},
             .want_text = "A"},
        // --- colocated ------------------------------------------------------------------------------
        Case{.name = "Colocated_OneDecodeCallNoRelease",
             .disaggregated = false,
             .decode = {.events = {Tokens("AB", 2000), Tokens("C", 4000, FinishReason::kStop)}},
             .want_states = {FS::kDecoding, FS::kFinished},
             .want_log = {"Decode c0", "tokens", "tokens"},
             .want_text = "ABC",
             .want_finish = FinishReason::kStop},
        Case{.name = "Colocated_NoLiveWorker",
             .disaggregated = false,
             .decode_live = false,
             .want_code = absl::StatusCode::kUnavailable,
             .want_message = "no live colocated worker",
             .want_states = {FS::kDecoding, FS::kFailed},
             .want_log = {}},
        Case{.name = "Colocated_WorkerDies",
             .disaggregated = false,
             .decode = {.events = {Tokens("A", 2000)},
                        .end_status = absl::UnavailableError("Socket closed")},
             .want_code = absl::StatusCode::kUnavailable,
             .want_message = "colocated worker 0 failed: Socket closed",
             .want_states = {FS::kDecoding, FS::kFailed},
             .want_log = {"Decode c0", "tokens"},
             .want_text = "A",
             .want_dead = {"c0"}}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// What the decode instance is asked to do, and what the latency model and the client learn.
TEST(RequestFlowDetailTest, HandOffCarriesTheFirstTokenAndTheKvLease) {
  auto tokenizer = runtime::testing::LoadTokenizer(runtime::testing::Gpt2StyleJson());
  WorkerRegistry registry({}, absl::Seconds(10));
  const absl::Time now = absl::Now();
  registry.Register({.role = WorkerRole::kPrefill, .incarnation_id = "p0"}, now);
  registry.Register({.role = WorkerRole::kDecode, .incarnation_id = "d0"}, now);
  FakeWorkerClient workers;
  workers.SetPrefill("p0", {.result = FirstToken('A')});
  workers.SetDecode("d0", {.events = {Kv(), Tokens("BC", 3000, FinishReason::kLength)}});
  LatencyModel latency;
  std::vector<GenerateChunk> chunks;
  PreparedRequest prepared{.request = {.request_id = "req-9"}, .prompt = {kPromptA, kPromptB},
                           .arrival_us = 500};
  prepared.request.params.seed = 42;
  RequestFlow flow({.tokenizer = tokenizer.get(), .registry = &registry, .latency_model = &latency,
                    .workers = &workers, .kv_lease = absl::Seconds(7),
                    .write = [&](const GenerateChunk& chunk) {
                      chunks.push_back(chunk);
                      return true;
                    },
                    .is_cancelled = [] { return false; }},
                   std::move(prepared));
  ASSERT_THAT(flow.Run(), absl_testing::IsOk());

  ASSERT_EQ(workers.prefill_calls().size(), 1u);
  EXPECT_EQ(workers.prefill_calls()[0].kv_lease, absl::Seconds(7));
  EXPECT_EQ(workers.prefill_calls()[0].params.seed, 42u);
  ASSERT_EQ(workers.decode_calls().size(), 1u);
  const DecodeCall& decode = workers.decode_calls()[0];
  EXPECT_THAT(decode.prompt_token_ids, ElementsAre(kPromptA, kPromptB));
  EXPECT_THAT(decode.generated_token_ids, ElementsAre('A'));
  ASSERT_TRUE(decode.kv_source.has_value());
  EXPECT_EQ(*decode.kv_source, Handoff());  // carried unchanged

  // Timing rides on the first chunk after the scheduler learns it.
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].timing.arrival_us, 500);
  EXPECT_EQ(chunks[0].timing.prefill_end_us, 2000);
  EXPECT_THAT(chunks[0].timing.token_emit_us, ElementsAre(2000));
  EXPECT_EQ(chunks[1].timing.kv_transfer_end_us, 2200);
  EXPECT_THAT(chunks[1].timing.token_emit_us, ElementsAre(3000, 4000));
  EXPECT_EQ(chunks[1].request_id, "req-9");
  EXPECT_THAT(chunks[1].prompt_token_ids, ElementsAre(kPromptA, kPromptB));
  EXPECT_EQ(chunks[1].num_generated_tokens, 3);
  EXPECT_EQ(chunks[0].num_generated_tokens, 0);  // counts only on the last chunk

  // The latency model saw the prefill and one decode gap (the first decode emission has no
  // predecessor in the stream).
  EXPECT_TRUE(latency.PrefillTokensPerSecond("prefill worker 0").has_value());
  const std::optional<DecodeStepFit> fit = latency.DecodeFit("decode worker 0");
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->num_observations, 1);
  EXPECT_DOUBLE_EQ(fit->StepMs(1), 1.0);
}

// Issue 37, defect 5: a client that stopped reading taught the latency model a 450 ms decode step.
TEST(RequestFlowDetailTest, AClientThatReadsSlowlyTeachesTheLatencyModelNothing) {
  auto tokenizer = runtime::testing::LoadTokenizer(runtime::testing::Gpt2StyleJson());
  for (const bool slow : {false, true}) {
    SCOPED_TRACE(slow ? "slow reader" : "fast reader");
    WorkerRegistry registry({}, absl::Seconds(10));
    const absl::Time now = absl::Now();
    registry.Register({.role = WorkerRole::kPrefill, .incarnation_id = "p0"}, now);
    registry.Register({.role = WorkerRole::kDecode, .incarnation_id = "d0"}, now);
    FakeWorkerClient workers;
    workers.SetPrefill("p0", {.result = FirstToken('A')});
    workers.SetDecode("d0", {.events = {Kv(), Tokens("B", 3000), Tokens("C", 4000),
                                        Tokens("D", 5000, FinishReason::kLength)}});
    LatencyModel latency;
    int num_chunks = 0;
    RequestFlow flow({.tokenizer = tokenizer.get(), .registry = &registry, .latency_model = &latency,
                      .workers = &workers,
                      .write = [&](const GenerateChunk&) {
                        // The second chunk (B) is where a slow client's socket is full.
                        if (++num_chunks == 2 && slow) absl::SleepFor(absl::Milliseconds(100));
                        return true;
                      },
                      .is_cancelled = [] { return false; }},
                     PreparedRequest{.request = {.request_id = "req-1"}, .prompt = {kPromptA, kPromptB}});
    ASSERT_THAT(flow.Run(), absl_testing::IsOk());
    const std::optional<DecodeStepFit> fit = latency.DecodeFit("decode worker 0");
    if (slow) {
      EXPECT_FALSE(fit.has_value() && fit->num_observations > 0);
    } else {
      ASSERT_TRUE(fit.has_value());
      EXPECT_EQ(fit->num_observations, 2);  // B -> C, C -> D
    }
  }
}

// Surviving dead workers: several instances per phase, scripted call by call.
class RequestFlowSurvivalTest : public ::testing::Test {
 protected:
  void SetUp() override { tokenizer_ = runtime::testing::LoadTokenizer(runtime::testing::Gpt2StyleJson()); }

  void Add(WorkerRole role, int idx, const std::string& id) {
    registry_.Register({.role = role, .instance_idx = idx, .incarnation_id = id, .address = id},
                       absl::Now());
    registry_.Heartbeat(id, {.num_kv_blocks_total = 100}, absl::Now());
  }

  absl::Status Run(absl::Duration worker_wait = absl::ZeroDuration(),
                   std::function<bool()> is_cancelled = [] { return false; }, bool disaggregated = true) {
    PreparedRequest prepared{.request = {.request_id = "req-1"}, .prompt = {kPromptA, kPromptB}};
    prepared.request.params.max_tokens = 8;
    RequestFlow flow({.tokenizer = tokenizer_.get(), .registry = &registry_, .latency_model = &latency_,
                      .workers = &workers_, .disaggregated = disaggregated, .worker_wait = worker_wait,
                      .retry_deadline = retry_deadline_,
                      .write = [&](const GenerateChunk& chunk) {
                        text_ += chunk.text;
                        return true;
                      },
                      .is_cancelled = std::move(is_cancelled)},
                     std::move(prepared));
    const absl::Status status = flow.Run();
    trace_ = flow.trace();
    return status;
  }

  // Prefill instances 0..n-1 ("p0".."p<n-1>"), each failing as unreachable ("gone i").
  void AddFailingPrefills(int n) {
    for (int i = 0; i < n; ++i) {
      const std::string id = absl::StrCat("p", i);
      Add(WorkerRole::kPrefill, i, id);
      workers_.SetPrefill(id, {.result = absl::UnavailableError(absl::StrCat("gone ", i))});
    }
  }

  bool Live(const std::string& id) { return registry_.LoadOf(WorkerRef{.incarnation_id = id}).has_value(); }

  std::unique_ptr<runtime::Tokenizer> tokenizer_;
  WorkerRegistry registry_{{}, absl::Seconds(10)};
  LatencyModel latency_;
  FakeWorkerClient workers_;
  absl::Duration retry_deadline_ = absl::Seconds(60);
  std::string text_;
  std::vector<FlowState> trace_;
};

const DecodeScript kDecodesBC = {.events = {Kv(), Tokens("BC", 3000, FinishReason::kLength)}};

TEST_F(RequestFlowSurvivalTest, ADeadPrefillInstanceIsReplacedByAnother) {
  Add(WorkerRole::kPrefill, 0, "p0");
  Add(WorkerRole::kPrefill, 1, "p1");
  Add(WorkerRole::kDecode, 0, "d0");
  workers_.SetPrefill("p0", {.result = absl::UnavailableError("Socket closed")});
  workers_.SetPrefill("p1", {.result = FirstToken('A')});
  workers_.SetDecode("d0", kDecodesBC);
  ASSERT_THAT(Run(), absl_testing::IsOk());
  EXPECT_EQ(text_, "ABC");
  EXPECT_THAT(workers_.log(), ElementsAre("Prefill p0", "Prefill p1", "Decode d0", "kv", "Release p1", "tokens"));
  EXPECT_FALSE(Live("p0"));
  EXPECT_THAT(trace_, ElementsAre(FS::kPrefilling, FS::kHandingOff, FS::kDecoding, FS::kFinished));
}

TEST_F(RequestFlowSurvivalTest, ADecodeInstanceDeadBeforeThePullHandsOffToAnother) {
  Add(WorkerRole::kPrefill, 0, "p0");
  Add(WorkerRole::kDecode, 0, "d0");
  Add(WorkerRole::kDecode, 1, "d1");
  workers_.SetPrefill("p0", {.result = FirstToken('A')});
  workers_.SetDecode("d0", {.end_status = absl::UnavailableError("failed to connect to all addresses")});
  workers_.SetDecode("d1", kDecodesBC);
  ASSERT_THAT(Run(), absl_testing::IsOk());
  EXPECT_EQ(text_, "ABC");
  // The prefill instance kept the KV for the second decode instance, and released it once.
  EXPECT_THAT(workers_.log(), ElementsAre("Prefill p0", "Decode d0", "Decode d1", "kv", "Release p0", "tokens"));
  EXPECT_THAT(workers_.released(), ElementsAre("req-1"));
  EXPECT_FALSE(Live("d0"));
  ASSERT_EQ(workers_.decode_calls().size(), 2u);
  EXPECT_EQ(workers_.decode_calls()[1].kv_source, Handoff());
}

TEST_F(RequestFlowSurvivalTest, APullWhoseSourceDiedBlamesTheSourceAndRunsThePromptAgain) {
  Add(WorkerRole::kPrefill, 0, "p0");
  Add(WorkerRole::kPrefill, 1, "p1");
  Add(WorkerRole::kDecode, 0, "d0");
  workers_.SetPrefill("p0", {.result = FirstToken('A')});
  workers_.ThenPrefill("p0", {.result = absl::UnavailableError("Socket closed")});
  workers_.SetPrefill("p1", {.result = FirstToken('Z')});  // the token after the first
  workers_.SetDecode("d0", {.end_status = absl::AbortedError(
                                "KV pull from the prefill instance failed: connection refused")});
  workers_.ThenDecode("d0", kDecodesBC);
  ASSERT_THAT(Run(), absl_testing::IsOk());
  EXPECT_EQ(text_, "AZBC");  // the first token once
  EXPECT_THAT(workers_.log(), ElementsAre("Prefill p0", "Decode d0", "Release p0", "Prefill p0",
                                          "Prefill p1", "Decode d0", "kv", "Release p1", "tokens"));
  EXPECT_TRUE(Live("d0"));   // the puller is not blamed
  EXPECT_FALSE(Live("p0"));  // the dead source is found out when called again
  ASSERT_EQ(workers_.prefill_calls().size(), 3u);
  EXPECT_THAT(workers_.prefill_calls()[2].generated_token_ids, ElementsAre('A'));
  ASSERT_EQ(workers_.decode_calls().size(), 2u);
  EXPECT_THAT(workers_.decode_calls()[1].generated_token_ids, ElementsAre('A', 'Z'));
  EXPECT_THAT(trace_, ElementsAre(FS::kPrefilling, FS::kHandingOff, FS::kPrefilling, FS::kHandingOff,
                                  FS::kDecoding, FS::kFinished));
}

TEST_F(RequestFlowSurvivalTest, APullFromASourceCutOffMidPullIsAbandonedWithoutBlamingThePuller) {
  Add(WorkerRole::kPrefill, 0, "p0");
  Add(WorkerRole::kPrefill, 1, "p1");
  Add(WorkerRole::kDecode, 0, "d0");
  workers_.SetPrefill("p0", {.result = FirstToken('A')});
  workers_.SetPrefill("p1", {.result = FirstToken('Z')});
  // p0 freezes while d0 pulls from it: the registry cuts it off, and d0's call is abandoned.
  workers_.SetDecode("d0", {.on_call = [this] { registry_.MarkDead("p0", "no heartbeat"); },
                            .polls_abandon = true});
  workers_.ThenDecode("d0", kDecodesBC);
  ASSERT_THAT(Run(), absl_testing::IsOk());
  EXPECT_EQ(text_, "AZBC");
  EXPECT_THAT(workers_.log(), ElementsAre("Prefill p0", "Decode d0", "abandoned", "Release p0",
                                          "Prefill p1", "Decode d0", "kv", "Release p1", "tokens"));
  EXPECT_TRUE(Live("d0"));  // the puller is not blamed
  EXPECT_THAT(trace_, ElementsAre(FS::kPrefilling, FS::kHandingOff, FS::kPrefilling, FS::kHandingOff,
                                  FS::kDecoding, FS::kFinished));
}

TEST_F(RequestFlowSurvivalTest, ASourceCutOffAfterThePullLeavesTheDecodeStreamAlone) {
  Add(WorkerRole::kPrefill, 0, "p0");
  Add(WorkerRole::kDecode, 0, "d0");
  workers_.SetPrefill("p0", {.result = FirstToken('A')});
  // p0 dies, but the KV had moved (the kv event comes first): the stream owes it nothing.
  DecodeScript script = kDecodesBC;
  script.on_call = [this] { registry_.MarkDead("p0", "no heartbeat"); };
  script.polls_abandon = true;
  workers_.SetDecode("d0", script);
  ASSERT_THAT(Run(), absl_testing::IsOk());
  EXPECT_EQ(text_, "ABC");
  EXPECT_THAT(workers_.log(), ElementsAre("Prefill p0", "Decode d0", "kv", "Release p0", "tokens"));
  EXPECT_TRUE(Live("d0"));
}

TEST_F(RequestFlowSurvivalTest, ADecodeInstanceDeadMidStreamResumesOnAnotherByTokenReplay) {
  Add(WorkerRole::kPrefill, 0, "p0");
  Add(WorkerRole::kDecode, 0, "d0");
  Add(WorkerRole::kDecode, 1, "d1");
  workers_.SetPrefill("p0", {.result = FirstToken('A')});
  workers_.ThenPrefill("p0", {.result = FirstToken('D')});  // the replay samples the next token
  workers_.SetDecode("d0", {.events = {Kv(), Tokens("BC", 3000)},
                            .end_status = absl::UnavailableError("Socket closed")});
  workers_.SetDecode("d1", {.events = {Kv(), Tokens("EF", 9000, FinishReason::kLength)}});
  ASSERT_THAT(Run(), absl_testing::IsOk());
  EXPECT_EQ(text_, "ABCDEF");  // nothing lost, nothing twice
  EXPECT_THAT(workers_.log(), ElementsAre("Prefill p0", "Decode d0", "kv", "Release p0", "tokens",
                                          "Prefill p0", "Decode d1", "kv", "Release p0", "tokens"));
  ASSERT_EQ(workers_.prefill_calls().size(), 2u);
  EXPECT_THAT(workers_.prefill_calls()[1].prompt_token_ids, ElementsAre(kPromptA, kPromptB));
  EXPECT_THAT(workers_.prefill_calls()[1].generated_token_ids, ElementsAre('A', 'B', 'C'));
  ASSERT_EQ(workers_.decode_calls().size(), 2u);
  EXPECT_THAT(workers_.decode_calls()[1].generated_token_ids, ElementsAre('A', 'B', 'C', 'D'));
  EXPECT_FALSE(Live("d0"));
  EXPECT_TRUE(Live("d1"));
  EXPECT_THAT(trace_, ElementsAre(FS::kPrefilling, FS::kHandingOff, FS::kDecoding, FS::kPrefilling,
                                  FS::kHandingOff, FS::kDecoding, FS::kFinished));
}

TEST_F(RequestFlowSurvivalTest, AColocatedInstanceDeadMidStreamResumesOnAnother) {
  Add(WorkerRole::kColocated, 0, "c0");
  Add(WorkerRole::kColocated, 1, "c1");
  workers_.SetDecode("c0", {.events = {Tokens("AB", 3000)}, .end_status = absl::UnavailableError("Socket closed")});
  workers_.SetDecode("c1", {.events = {Tokens("CD", 9000, FinishReason::kLength)}});
  ASSERT_THAT(Run(absl::ZeroDuration(), [] { return false; }, /*disaggregated=*/false), absl_testing::IsOk());
  EXPECT_EQ(text_, "ABCD");
  ASSERT_EQ(workers_.decode_calls().size(), 2u);
  EXPECT_THAT(workers_.decode_calls()[0].generated_token_ids, ElementsAre());
  EXPECT_THAT(workers_.decode_calls()[1].generated_token_ids, ElementsAre('A', 'B'));
  EXPECT_FALSE(Live("c0"));
}

TEST_F(RequestFlowSurvivalTest, ADecodeInstanceDeadWithNoOtherFailsNamingIt) {
  Add(WorkerRole::kPrefill, 0, "p0");
  Add(WorkerRole::kDecode, 0, "d0");
  workers_.SetPrefill("p0", {.result = FirstToken('A')});
  workers_.ThenPrefill("p0", {.result = FirstToken('C')});
  workers_.SetDecode("d0", {.events = {Kv(), Tokens("B", 3000)},
                            .end_status = absl::UnavailableError("Socket closed")});
  EXPECT_THAT(Run(), StatusIs(absl::StatusCode::kUnavailable,
                              HasSubstr("no live decode worker (waited 0) after decode worker 0 failed: "
                                        "Socket closed")));
  EXPECT_EQ(text_, "ABC");  // the replay's token, then no decode instance to go on
  EXPECT_THAT(workers_.released(), ElementsAre("req-1", "req-1"));  // each prefill's KV, once
}

// Issue 37, defect 6: a fixed three failures gave up while a live worker could still take the
// request; now it goes on until none can.
TEST_F(RequestFlowSurvivalTest, RetriesWhileALiveWorkerCanTakeItThenSaysNoneCould) {
  AddFailingPrefills(6);
  Add(WorkerRole::kDecode, 0, "d0");
  EXPECT_THAT(Run(), StatusIs(absl::StatusCode::kUnavailable,
                              HasSubstr("no live prefill worker (waited 0) after prefill worker 5 failed: gone 5")));
  for (int i = 0; i < 6; ++i) EXPECT_FALSE(Live(absl::StrCat("p", i)));
  EXPECT_EQ(text_, "");
}

TEST_F(RequestFlowSurvivalTest, SurvivesManyFailuresThatLeaveALiveWorker) {
  AddFailingPrefills(5);
  Add(WorkerRole::kPrefill, 5, "p5");
  workers_.SetPrefill("p5", {.result = FirstToken('A')});
  Add(WorkerRole::kDecode, 0, "d0");
  workers_.SetDecode("d0", kDecodesBC);
  EXPECT_THAT(Run(), absl_testing::IsOk());
  EXPECT_EQ(text_, "ABC");
}

TEST_F(RequestFlowSurvivalTest, GivesUpAtTheRetryDeadlineSayingSo) {
  Add(WorkerRole::kPrefill, 0, "p0");
  Add(WorkerRole::kPrefill, 1, "p1");
  workers_.SetPrefill("p0", {.result = absl::UnavailableError("gone 0")});
  workers_.SetPrefill("p1", {.result = absl::UnavailableError("gone 1")});
  Add(WorkerRole::kDecode, 0, "d0");
  retry_deadline_ = absl::ZeroDuration();
  EXPECT_THAT(Run(), StatusIs(absl::StatusCode::kUnavailable,
                              HasSubstr("gone 0 (1 worker failures over 0; gave up at the retry deadline of 0)")));
  EXPECT_TRUE(Live("p1"));
}

TEST_F(RequestFlowSurvivalTest, WaitsForALiveInstanceUpToWorkerWait) {
  Add(WorkerRole::kDecode, 0, "d0");
  workers_.SetPrefill("p0", {.result = FirstToken('A')});
  workers_.SetDecode("d0", kDecodesBC);
  std::thread late([&] {
    absl::SleepFor(absl::Milliseconds(200));
    Add(WorkerRole::kPrefill, 0, "p0");
  });
  const absl::Status status = Run(absl::Seconds(20));
  late.join();
  ASSERT_THAT(status, absl_testing::IsOk());
  EXPECT_EQ(text_, "ABC");
}

TEST_F(RequestFlowSurvivalTest, AClientThatLeavesWhileWaitingEndsAtOnce) {
  Add(WorkerRole::kDecode, 0, "d0");
  std::atomic<bool> cancelled = false;
  std::thread leave([&] {
    absl::SleepFor(absl::Milliseconds(100));
    cancelled = true;
  });
  const absl::Time start = absl::Now();
  const absl::Status status = Run(absl::Seconds(60), [&] { return cancelled.load(); });
  leave.join();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

}  // namespace
}  // namespace baton::scheduler
