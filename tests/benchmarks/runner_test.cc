// The open-loop runner against a client whose latency is fixed (it sleeps): requests go out at
// their arrival times whatever is in flight, the concurrency cap holds and is reported, and a stop
// cancels what is in flight and keeps what was recorded.
#include "benchmarks/bench/runner.h"

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::bench {
namespace {

using namespace std::chrono_literals;

// Answers after first_token, then one token every token_gap; honours cancellation.
class SleepingClient final : public GenerationClient {
 public:
  SleepingClient(std::chrono::milliseconds first_token, std::chrono::milliseconds token_gap)
      : first_token_(first_token), token_gap_(token_gap) {}

  absl::Status Generate(const GenerationRequest& request, Cancellation* cancel,
                        GenerationTrace* trace) override {
    const int in_flight = ++in_flight_;
    int seen = max_in_flight_.load();
    while (in_flight > seen && !max_in_flight_.compare_exchange_weak(seen, in_flight)) {
    }
    std::atomic<bool> cancelled = false;
    cancel->SetHook([&] { cancelled = true; });
    absl::Status status = absl::OkStatus();
    Clock::time_point next = Clock::now() + first_token_;
    for (int i = 0; i < request.max_tokens && status.ok(); ++i) {
      while (Clock::now() < next) {
        if (cancelled) {
          status = absl::CancelledError("cancelled");
          break;
        }
        std::this_thread::sleep_for(1ms);
      }
      if (status.ok()) trace->token_times.push_back(Clock::now());
      next += token_gap_;
    }
    cancel->ClearHook();
    trace->num_output_tokens = static_cast<int>(trace->token_times.size());
    --in_flight_;
    return status;
  }
  absl::StatusOr<ModelInfo> GetModelInfo() override { return ModelInfo{}; }

  int max_in_flight() const { return max_in_flight_; }

 private:
  const std::chrono::milliseconds first_token_;
  const std::chrono::milliseconds token_gap_;
  std::atomic<int> in_flight_ = 0;
  std::atomic<int> max_in_flight_ = 0;
};

// `n` requests every `gap_s` seconds, 3 tokens each.
std::vector<PlannedRequest> EvenPlan(int n, double gap_s, int num_tokens = 3) {
  std::vector<PlannedRequest> plan(n);
  for (int i = 0; i < n; ++i) {
    plan[i] = {.request_idx = i,
               .arrival_s = i * gap_s,
               .warmup = i == 0,
               .input_len = 2,
               .output_len = num_tokens,
               .prompt_ids = {1, 2}};
  }
  return plan;
}

TEST(RunnerTest, OpenLoopSendsOnScheduleWhateverIsInFlight) {
  // A request every 10 ms, each taking 100 ms: about 10 are in flight at once.
  SleepingClient client(50ms, 25ms);
  const std::vector<PlannedRequest> plan = EvenPlan(30, 0.01);
  RunProgress progress;
  const RunResult result =
      RunOpenLoop(client, plan, {.max_concurrency = 64, .progress = &progress});
  ASSERT_EQ(result.records.size(), 30u);
  EXPECT_GE(result.dispatch.max_in_flight, 6);
  EXPECT_EQ(result.dispatch.num_delayed_by_cap, 0);
  EXPECT_EQ(result.dispatch.num_not_sent, 0);
  EXPECT_FALSE(result.dispatch.interrupted);
  EXPECT_LT(result.dispatch.max_dispatch_lag_s, 0.05);
  EXPECT_EQ(progress.num_sent, 30);
  EXPECT_EQ(progress.num_completed, 30);
  for (size_t i = 0; i < result.records.size(); ++i) {
    const RequestRecord& r = result.records[i];
    EXPECT_EQ(r.request_idx, static_cast<int>(i));
    EXPECT_EQ(r.warmup, i == 0);
    EXPECT_TRUE(r.ok) << r.error;
    ASSERT_EQ(r.token_s.size(), 3u);
    EXPECT_GE(r.sent_s, r.arrival_s);
    // The client's first token comes 50 ms after the send.
    EXPECT_GE(r.token_s[0] - r.arrival_s, 0.045);
    EXPECT_LT(r.token_s[0] - r.arrival_s, 0.5);
    EXPECT_GE(r.end_s, r.token_s.back());
  }
}

TEST(RunnerTest, ConcurrencyCapHoldsAndIsReported) {
  SleepingClient client(30ms, 10ms);
  const RunResult result = RunOpenLoop(client, EvenPlan(12, 0.0), {.max_concurrency = 3});
  ASSERT_EQ(result.records.size(), 12u);
  EXPECT_EQ(result.dispatch.max_in_flight, 3);
  EXPECT_LE(client.max_in_flight(), 3);
  // Requests 4..12 arrive while 3 are in flight; those that find a slot freed by a finished round
  // are not delayed, so at least one per later round (3) and at most all nine wait.
  EXPECT_GE(result.dispatch.num_delayed_by_cap, 3);
  EXPECT_LE(result.dispatch.num_delayed_by_cap, 9);
  EXPECT_EQ(result.dispatch.max_concurrency, 3);
  EXPECT_GT(result.dispatch.max_dispatch_lag_s, 0.1);  // the last waited for three rounds
  for (const RequestRecord& r : result.records) EXPECT_TRUE(r.ok);
}

TEST(RunnerTest, StopCancelsInFlightAndKeepsWhatWasRecorded) {
  // Requests every 100 ms that take 10 s each; stop after 370 ms.
  SleepingClient client(20ms, 1000ms);
  std::atomic<bool> stop = false;
  std::thread stopper([&] {
    std::this_thread::sleep_for(370ms);
    stop = true;
  });
  const Clock::time_point start = Clock::now();
  const RunResult result = RunOpenLoop(client, EvenPlan(20, 0.1, 10), {.stop = &stop});
  stopper.join();
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_TRUE(result.dispatch.interrupted);
  EXPECT_GE(result.records.size(), 3u);
  EXPECT_LE(result.records.size(), 5u);
  EXPECT_EQ(result.dispatch.num_not_sent, 20 - static_cast<int>(result.records.size()));
  for (const RequestRecord& r : result.records) {
    EXPECT_TRUE(r.cancelled);
    EXPECT_FALSE(r.ok);
    EXPECT_GE(r.token_s.size(), 1u);  // the first token came before the stop
  }
}

// Answers each prompt with max_tokens ids of its own (900 + the call's number) and remembers the
// prompts, so a session's histories can be checked. A text-only client answers with one letter per
// token and no ids, as the OpenAI APIs stream.
class EchoingClient final : public GenerationClient {
 public:
  explicit EchoingClient(bool text_only = false) : text_only_(text_only) {}

  absl::Status Generate(const GenerationRequest& request, Cancellation*, GenerationTrace* trace) override {
    std::lock_guard<std::mutex> lock(mu_);
    prompts_[request.request_id] = request.prompt_ids;
    for (int i = 0; i < request.max_tokens; ++i) {
      trace->token_times.push_back(Clock::now());
      if (text_only_) {
        trace->output_text += static_cast<char>('a' + prompts_.size());
      } else {
        trace->output_ids.push_back(900 + static_cast<int32_t>(prompts_.size()));
      }
    }
    trace->num_output_tokens = request.max_tokens;
    return absl::OkStatus();
  }
  absl::StatusOr<ModelInfo> GetModelInfo() override { return ModelInfo{}; }
  std::vector<int32_t> prompt(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    return prompts_.at(id);
  }

 private:
  const bool text_only_;
  std::mutex mu_;
  std::map<std::string, std::vector<int32_t>> prompts_;
};

std::vector<PlannedRequest> TwoTurnSession() {
  return {{.request_idx = 0, .input_len = 2, .output_len = 2, .prompt_ids = {1, 2}, .session = 0, .turn = 0},
          {.request_idx = 1, .input_len = 1, .output_len = 2, .prompt_ids = {3}, .session = 0, .turn = 1}};
}

TEST(RunnerTest, ASessionSendsItsTurnsInOrderEachBehindItsHistory) {
  std::vector<PlannedRequest> plan;
  for (int s = 0; s < 2; ++s) {
    for (int t = 0; t < 3; ++t) {
      plan.push_back({.request_idx = static_cast<int>(plan.size()), .arrival_s = t == 0 ? 0.01 * s : 0,
                      .input_len = 2, .output_len = 2, .prompt_ids = {10 * s + t, 10 * s + t},
                      .session = s, .turn = t, .think_s = 0.03});
    }
  }
  EchoingClient client;
  const RunResult result = RunOpenLoop(client, plan, {});
  ASSERT_EQ(result.records.size(), 6u);
  for (int s = 0; s < 2; ++s) {
    const std::vector<int32_t> first = client.prompt(absl::StrCat("bench-", 3 * s));
    const std::vector<int32_t> second = client.prompt(absl::StrCat("bench-", 3 * s + 1));
    const std::vector<int32_t> third = client.prompt(absl::StrCat("bench-", 3 * s + 2));
    EXPECT_EQ(first, (std::vector<int32_t>{10 * s, 10 * s}));
    ASSERT_EQ(second.size(), 6u) << "turn 0's prompt, its 2-token answer, the new message";
    EXPECT_EQ(std::vector<int32_t>(second.begin(), second.begin() + 2), first);
    EXPECT_GE(second[2], 900);
    EXPECT_EQ(second[4], 10 * s + 1);
    ASSERT_EQ(third.size(), 10u);
    EXPECT_EQ(std::vector<int32_t>(third.begin(), third.begin() + 6), second);
    for (int t = 1; t < 3; ++t) {
      const RequestRecord& turn = result.records[3 * s + t];
      const RequestRecord& before = result.records[3 * s + t - 1];
      EXPECT_GE(turn.sent_s, before.end_s + 0.03) << "the think time after the previous answer";
      EXPECT_EQ(turn.input_len, 2 + 4 * t);
      EXPECT_NEAR(turn.arrival_s, turn.sent_s, 1e-3);
    }
  }
}

TEST(RunnerTest, ATextAnswerJoinsTheHistoryThroughTheEncoder) {
  EchoingClient client(/*text_only=*/true);
  RunnerOptions options;
  options.encode_answer = [](const std::string& text) {
    std::vector<int32_t> ids;
    for (char c : text) ids.push_back(500 + c);
    return ids;
  };
  const RunResult result = RunOpenLoop(client, TwoTurnSession(), options);
  ASSERT_EQ(result.records.size(), 2u);
  EXPECT_TRUE(result.records[1].ok) << result.records[1].error;
  EXPECT_EQ(client.prompt("bench-1"), (std::vector<int32_t>{1, 2, 500 + 'b', 500 + 'b', 3}));
}

TEST(RunnerTest, ASessionEndsWhenTheAnswerCannotJoinTheHistory) {
  EchoingClient client(/*text_only=*/true);  // text, and no encoder to turn it into ids
  const RunResult result = RunOpenLoop(client, TwoTurnSession(), {});
  ASSERT_EQ(result.records.size(), 1u);
  EXPECT_THAT(result.records[0].error, testing::HasSubstr("the server sent no answer"));
  EXPECT_EQ(result.dispatch.num_not_sent, 1);
}

}  // namespace
}  // namespace baton::bench
