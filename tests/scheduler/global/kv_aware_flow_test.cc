// KV-aware routing and conditional disaggregation in a request's flow (request_flow.h), against a
// scripted FakeWorkerClient and a registry whose prefix index is fed cache events as the workers'
// heartbeats would feed it: the prefill goes where the prompt's prefix lives unless its queue
// outweighs it, and with max_local_prefill_tokens the decode instance holding all but a short
// remainder prefills the request itself (no hand-off), going back to a remote prefill if it dies.
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/global/latency_model.h"
#include "scheduler/global/prefix_index.h"
#include "scheduler/global/request_flow.h"
#include "scheduler/global/worker_registry.h"
#include "tests/runtime/tokenizer/tokenizer_test_util.h"
#include "tests/scheduler/global/fake_worker_client.h"
#include "tests/testing/status_matchers.h"

namespace baton::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using testing::FakeWorkerClient;
using FS = FlowState;
using runtime::FinishReason;

constexpr int kBlockSize = 2;
const std::vector<int32_t> kPrompt = {'a', 'b', 'c', 'd', 'e', 'f'};  // three blocks

PrefillResult FirstToken(int32_t id) {
  return PrefillResult{
      .first_token_id = id,
      .kv = runtime::KvHandoff{.model_shape = {.num_layers = 1, .num_kv_heads = 1, .head_dim = 8,
                                               .block_size = kBlockSize},
                               .rank_sources = {{.hostname = "h", .shm_name = "/kv", .tcp_address = "h:1"}},
                               .blocks = {1, 2, 3},
                               .num_tokens = 6},
      .prefill_start_us = 1000,
      .prefill_end_us = 2000};
}

DecodeEvent Tokens(std::string text, FinishReason finish = FinishReason::kNone) {
  TokenChunk chunk{.finish_reason = finish};
  for (char c : text) {
    chunk.token_ids.push_back(static_cast<unsigned char>(c));
    chunk.emit_us.push_back(3000);
  }
  return chunk;
}

class KvAwareFlowTest : public ::testing::Test {
 protected:
  void SetUp() override { tokenizer_ = runtime::testing::LoadTokenizer(runtime::testing::Gpt2StyleJson()); }

  void Add(WorkerRole role, int idx, const std::string& id) {
    registry_.Register({.role = role, .instance_idx = idx, .incarnation_id = id, .address = id,
                        .block_size = kBlockSize, .prefix_cache_salt = "salt"},
                       absl::Now());
    registry_.Heartbeat(id, {.num_kv_blocks_total = 100}, absl::Now());
  }

  // The instance's cache holds the prompt's first num_blocks blocks, as its events said.
  void Holds(const std::string& id, int num_blocks) {
    PromptHashes hashes(kPrompt);
    runtime::BlockAllocator::CacheEvents events;
    for (int b = 0; b < num_blocks; ++b) events.events.push_back({.hash = hashes.For("salt", kBlockSize)[b]});
    registry_.ApplyCacheEvents(id, events);
  }

  absl::Status Run(int max_local_prefill_tokens = 0) {
    PreparedRequest prepared{.request = {.request_id = "req-1"}, .prompt = kPrompt};
    prepared.request.params.max_tokens = 8;
    RequestFlow flow({.tokenizer = tokenizer_.get(), .registry = &registry_, .latency_model = &latency_,
                      .workers = &workers_, .worker_wait = absl::ZeroDuration(),
                      .max_local_prefill_tokens = max_local_prefill_tokens,
                      .kv_aware_routing = kv_aware_routing_,
                      .write = [&](const GenerateChunk& chunk) {
                        text_ += chunk.text;
                        return true;
                      },
                      .is_cancelled = [] { return false; }},
                     std::move(prepared));
    const absl::Status status = flow.Run();
    trace_ = flow.trace();
    routes_ = flow.routes();
    prefill_path_ = flow.prefill_path() == nullptr ? "" : flow.prefill_path();
    return status;
  }

  bool kv_aware_routing_ = true;
  std::unique_ptr<runtime::Tokenizer> tokenizer_;
  WorkerRegistry registry_{{}, absl::Seconds(10)};
  LatencyModel latency_;
  FakeWorkerClient workers_;
  std::string text_;
  std::vector<FlowState> trace_;
  std::vector<RouteRecord> routes_;
  std::string prefill_path_;
};

TEST_F(KvAwareFlowTest, ThePrefillGoesWhereThePrefixLives) {
  Add(WorkerRole::kPrefill, 0, "p0");
  Add(WorkerRole::kPrefill, 1, "p1");
  Add(WorkerRole::kDecode, 0, "d0");
  Holds("p1", 2);
  workers_.SetPrefill("p1", {.result = FirstToken('A')});
  workers_.SetDecode("d0", {.events = {KvTransferred{}, Tokens("B", FinishReason::kLength)}});
  ASSERT_THAT(Run(), absl_testing::IsOk());
  EXPECT_EQ(text_, "AB");
  EXPECT_THAT(workers_.log(), ElementsAre("Prefill p1", "Decode d0", "kv", "Release p1", "tokens"));
  ASSERT_EQ(routes_.size(), 2u);
  EXPECT_EQ(routes_[0].role, WorkerRole::kPrefill);
  EXPECT_STREQ(routes_[0].label, "prefix_cache");
  EXPECT_STREQ(routes_[1].label, "least_loaded");
  EXPECT_EQ(prefill_path_, "") << "conditional disaggregation is off";
}

TEST_F(KvAwareFlowTest, LeastLoadedRoutingLooksAtLoadAlone) {
  Add(WorkerRole::kPrefill, 0, "p0");
  Add(WorkerRole::kPrefill, 1, "p1");
  Add(WorkerRole::kDecode, 0, "d0");
  Holds("p1", 2);
  kv_aware_routing_ = false;  // routing_policy: least_loaded
  workers_.SetPrefill("p0", {.result = FirstToken('A')});
  workers_.SetDecode("d0", {.events = {KvTransferred{}, Tokens("B", FinishReason::kLength)}});
  ASSERT_THAT(Run(), absl_testing::IsOk());
  EXPECT_THAT(workers_.log(), ElementsAre("Prefill p0", "Decode d0", "kv", "Release p0", "tokens"));
  ASSERT_EQ(routes_.size(), 2u);
  EXPECT_STREQ(routes_[0].label, "least_loaded");
}

TEST_F(KvAwareFlowTest, AShortRemainderIsPrefilledOnTheDecodeInstanceHoldingThePrefix) {
  Add(WorkerRole::kPrefill, 0, "p0");
  Add(WorkerRole::kDecode, 0, "d0");
  Add(WorkerRole::kDecode, 1, "d1");
  Holds("d1", 2);  // 4 of the 6 tokens: 2 left, under the threshold of 2
  workers_.SetDecode("d1", {.events = {Tokens("AB", FinishReason::kLength)}});
  ASSERT_THAT(Run(/*max_local_prefill_tokens=*/2), absl_testing::IsOk());
  EXPECT_EQ(text_, "AB");
  EXPECT_THAT(workers_.log(), ElementsAre("Decode d1", "tokens")) << "no prefill instance, no hand-off";
  ASSERT_EQ(workers_.decode_calls().size(), 1u);
  EXPECT_FALSE(workers_.decode_calls()[0].kv_source.has_value());
  EXPECT_THAT(trace_, ElementsAre(FS::kPrefilling, FS::kDecoding, FS::kFinished));
  EXPECT_EQ(prefill_path_, "local");
  ASSERT_EQ(routes_.size(), 1u);
  EXPECT_STREQ(routes_[0].label, "prefix_cache");
  const std::optional<InstanceLoad> load = registry_.LoadOf(WorkerRef{.incarnation_id = "d1"});
  ASSERT_TRUE(load.has_value());
  EXPECT_EQ(load->outstanding_prefill_tokens, 0);
  EXPECT_EQ(load->num_active_requests, 0);
}

TEST_F(KvAwareFlowTest, ALongerRemainderIsHandedOff) {
  Add(WorkerRole::kPrefill, 0, "p0");
  Add(WorkerRole::kDecode, 0, "d0");
  Holds("d0", 1);  // 4 tokens left, over the threshold of 3
  workers_.SetPrefill("p0", {.result = FirstToken('A')});
  workers_.SetDecode("d0", {.events = {KvTransferred{}, Tokens("B", FinishReason::kLength)}});
  ASSERT_THAT(Run(/*max_local_prefill_tokens=*/3), absl_testing::IsOk());
  EXPECT_THAT(workers_.log(), ElementsAre("Prefill p0", "Decode d0", "kv", "Release p0", "tokens"));
  EXPECT_EQ(prefill_path_, "remote");
  EXPECT_TRUE(workers_.decode_calls()[0].kv_source.has_value());
}

TEST_F(KvAwareFlowTest, ALocalPrefillWhoseInstanceDiesRunsAgainByTheRule) {
  Add(WorkerRole::kPrefill, 0, "p0");
  Add(WorkerRole::kDecode, 0, "d0");
  Add(WorkerRole::kDecode, 1, "d1");
  Holds("d1", 3);
  workers_.SetDecode("d1", {.events = {Tokens("A")}, .end_status = absl::UnavailableError("Socket closed")});
  workers_.SetPrefill("p0", {.result = FirstToken('B')});  // d0 holds nothing: handed off
  workers_.SetDecode("d0", {.events = {KvTransferred{}, Tokens("C", FinishReason::kLength)}});
  ASSERT_THAT(Run(/*max_local_prefill_tokens=*/2), absl_testing::IsOk());
  EXPECT_EQ(text_, "ABC") << "token replay: nothing lost, nothing twice";
  EXPECT_THAT(workers_.log(), ElementsAre("Decode d1", "tokens", "Prefill p0", "Decode d0", "kv", "Release p0",
                                          "tokens"));
  EXPECT_FALSE(registry_.LoadOf(WorkerRef{.incarnation_id = "d1"}).has_value()) << "marked dead";
  EXPECT_EQ(prefill_path_, "remote");
  ASSERT_EQ(workers_.prefill_calls().size(), 1u);
  EXPECT_THAT(workers_.prefill_calls()[0].generated_token_ids, ElementsAre('A'));
}

TEST_F(KvAwareFlowTest, ADeadInstancesCacheIsForgotten) {
  Add(WorkerRole::kPrefill, 0, "p0");
  Holds("p0", 3);
  PromptHashes hashes(kPrompt);
  EXPECT_EQ(registry_.LiveInstances(WorkerRole::kPrefill, &hashes)[0].num_cached_tokens, 6);
  registry_.MarkDead("p0", "gone");
  Add(WorkerRole::kPrefill, 0, "p0-again");  // its restart: a new incarnation, an empty cache
  EXPECT_EQ(registry_.LiveInstances(WorkerRole::kPrefill, &hashes)[0].num_cached_tokens, 0);
  Holds("p0", 3);  // events of the dead incarnation go nowhere
  EXPECT_EQ(registry_.LiveInstances(WorkerRole::kPrefill, &hashes)[0].num_cached_tokens, 0);
}

}  // namespace
}  // namespace baton::scheduler
