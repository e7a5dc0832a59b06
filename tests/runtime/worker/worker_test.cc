// A prefill Worker and a decode Worker in one process, on a checkpoint written by the test, handing
// requests off over the host transport: the decode worker's KV admission queue (FIFO with
// head-of-line blocking, deadline, cancellation, nothing leaked) and the hand-off's tokens.
#include "runtime/worker/worker.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/transfer/socket_io.h"
#include "tests/testing/safetensors_writer.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int kVocabSize = 96;  // testing::TinyEngineSpec().vocab_size
constexpr int kBlockSize = 4;
constexpr int kMaxModelLen = 128;
// The decode pool holds exactly one sequence of max_model_len: 32 blocks of
// [2 layers, K and V, 4 slots, 2 kv heads, head_dim 8] floats.
constexpr size_t kDecodeKvBytes = 32 * 2 * 2 * kBlockSize * 2 * 8 * sizeof(float);

std::vector<int32_t> Prompt(int len, int salt) {
  std::vector<int32_t> ids(len);
  for (int i = 0; i < len; ++i) ids[i] = (i * 37 + salt * 11 + 5) % kVocabSize;
  return ids;
}

GenerationParams Greedy(int max_tokens) {
  GenerationParams params;
  params.max_tokens = max_tokens;
  params.ignore_eos = true;
  return params;
}

// What one Decode call saw.
struct DecodeLog {
  absl::Status status;
  bool kv_transferred = false;
  std::vector<int32_t> tokens;
};

class WorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_THAT(testing::WriteTinyModel(dir_.path(), testing::TinyEngineSpec()), IsOk());
    prefill_ = MakeWorker(WorkerRole::kPrefill, 1 << 20);
    decode_ = MakeWorker(WorkerRole::kDecode, kDecodeKvBytes);
    ASSERT_NE(prefill_, nullptr);
    ASSERT_NE(decode_, nullptr);
    ASSERT_EQ(decode_->num_kv_blocks(), 32);
  }

  std::unique_ptr<Worker> MakeWorker(WorkerRole role, size_t kv_cache_bytes) {
    WorkerOptions options{.role = role,
                          .engine = EngineConfig{.model_dir = dir_.path(),
                                                 .num_threads = 1,
                                                 .block_size = kBlockSize,
                                                 .kv_cache_bytes = kv_cache_bytes,
                                                 .max_model_len = kMaxModelLen}};
    absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Create(options);
    EXPECT_THAT(worker, IsOk());
    return worker.ok() ? *std::move(worker) : nullptr;
  }

  // Prefills on the prefill worker; the KV stays held for a minute.
  PrefillResult Prefill(const std::string& id, const std::vector<int32_t>& prompt,
                        const GenerationParams& params) {
    absl::StatusOr<PrefillResult> result = prefill_->Prefill(PrefillCall{
        .request_id = id,
        .prompt_token_ids = prompt,
        .params = params,
        .kv_lease = absl::Minutes(1),
        .deadline = absl::Now() + absl::Seconds(30)});
    EXPECT_THAT(result, IsOk());
    EXPECT_EQ(result->first_token.finish_reason, FinishReason::kNone);
    return *std::move(result);
  }

  // Decodes a prefilled request on the decode worker. on_kv_transferred runs inside emit (so while
  // it blocks, the request holds its blocks and has not started decoding).
  DecodeLog Decode(const std::string& id, const std::vector<int32_t>& prompt,
                   const GenerationParams& params, const PrefillResult& prefilled,
                   absl::Duration timeout, std::function<void()> on_kv_transferred = [] {}) {
    DecodeLog log;
    log.tokens.push_back(prefilled.first_token.token_id);
    log.status = decode_->Decode(DecodeCall{
        .request_id = id,
        .prompt_token_ids = prompt,
        .generated_token_ids = {prefilled.first_token.token_id},
        .params = params,
        .kv = prefilled.kv,
        .deadline = absl::Now() + timeout,
        .emit = [&](const DecodeEvent& event) {
          if (event.kv_transferred) {
            log.kv_transferred = true;
            on_kv_transferred();
          } else {
            log.tokens.push_back(event.token->token_id);
          }
          return true;
        }});
    return log;
  }

  // Polls the decode worker's stats until pred holds or 5 s pass.
  bool DecodeStatsReach(const std::function<bool(const WorkerStatsSnapshot&)>& pred) {
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (absl::Now() < deadline) {
      if (pred(decode_->Stats())) return true;
      absl::SleepFor(absl::Milliseconds(2));
    }
    return false;
  }

  bool DecodePoolEmpty() {
    return DecodeStatsReach([](const WorkerStatsSnapshot& s) {
      return s.engine.num_blocks_used == 0 && s.engine.num_sequences == 0 &&
             s.num_requests_waiting_for_kv == 0;
    });
  }

  testing::ScopedTempDir dir_;
  std::unique_ptr<Worker> prefill_;
  std::unique_ptr<Worker> decode_;
};

// The hand-off as a decode worker on another host sees it: every rank's pool over TCP only.
KvHandoff OverTcp(KvHandoff handoff) {
  for (KvSource& source : handoff.rank_sources) source.shm_name.clear();
  return handoff;
}

// A request that holds 26 of the decode pool's 32 blocks until `release` is notified.
class BlockingRequest {
 public:
  explicit BlockingRequest(std::function<DecodeLog(std::function<void()>)> run)
      : thread_([this, run = std::move(run)] {
          log_ = run([this] {
            holding_.Notify();
            release_.WaitForNotificationWithTimeout(absl::Seconds(20));
          });
        }) {}
  ~BlockingRequest() {
    if (!release_.HasBeenNotified()) release_.Notify();
    if (thread_.joinable()) thread_.join();
  }
  bool WaitUntilHolding() { return holding_.WaitForNotificationWithTimeout(absl::Seconds(20)); }
  DecodeLog Finish() {
    if (!release_.HasBeenNotified()) release_.Notify();
    thread_.join();
    return log_;
  }

 private:
  absl::Notification holding_;
  absl::Notification release_;
  DecodeLog log_;
  std::thread thread_;
};

TEST_F(WorkerTest, AHandedOffRequestDecodesTheSameTokensAsAColocatedOne) {
  const std::vector<int32_t> prompt = Prompt(23, 1);
  std::unique_ptr<Worker> colocated = MakeWorker(WorkerRole::kColocated, 1 << 20);
  ASSERT_NE(colocated, nullptr);
  std::vector<int32_t> expected;
  ASSERT_THAT(colocated->Decode(DecodeCall{.request_id = "whole",
                                           .prompt_token_ids = prompt,
                                           .params = Greedy(12),
                                           .deadline = absl::Now() + absl::Seconds(30),
                                           .emit =
                                               [&](const DecodeEvent& event) {
                                                 expected.push_back(event.token->token_id);
                                                 return true;
                                               }}),
              IsOk());
  ASSERT_EQ(expected.size(), 12u);

  const PrefillResult prefilled = Prefill("r", prompt, Greedy(12));
  const DecodeLog log = Decode("r", prompt, Greedy(12), prefilled, absl::Seconds(30));
  ASSERT_THAT(log.status, IsOk());
  EXPECT_TRUE(log.kv_transferred);
  EXPECT_EQ(log.tokens, expected);
  ASSERT_THAT(prefill_->Release("r"), IsOk());
  EXPECT_TRUE(DecodePoolEmpty());
}

// Issue 37, defect 5: a caller that stops taking a request's tokens (its client does not read) no
// longer keeps it in the batch: it is paused once kPauseBacklog tokens wait, and resumed when the
// caller catches up, with the tokens of an uninterrupted run.
TEST_F(WorkerTest, ARequestWhoseCallerStopsTakingTokensIsPausedThenResumed) {
  const std::vector<int32_t> prompt = Prompt(7, 3);
  std::unique_ptr<Worker> colocated = MakeWorker(WorkerRole::kColocated, 1 << 20);
  ASSERT_NE(colocated, nullptr);
  constexpr int kTokens = 100;  // more than kPauseBacklog + the prompt fits in max_model_len 128
  std::vector<int32_t> expected;
  ASSERT_THAT(colocated->Decode(DecodeCall{.request_id = "reader",
                                           .prompt_token_ids = prompt,
                                           .params = Greedy(kTokens),
                                           .deadline = absl::Now() + absl::Seconds(60),
                                           .emit =
                                               [&](const DecodeEvent& event) {
                                                 expected.push_back(event.token->token_id);
                                                 return true;
                                               }}),
              IsOk());
  absl::Notification stalled, go_on;
  std::vector<int32_t> tokens;
  std::thread caller([&] {
    EXPECT_THAT(colocated->Decode(DecodeCall{.request_id = "stalled",
                                             .prompt_token_ids = prompt,
                                             .params = Greedy(kTokens),
                                             .deadline = absl::Now() + absl::Seconds(60),
                                             .emit =
                                                 [&](const DecodeEvent& event) {
                                                   tokens.push_back(event.token->token_id);
                                                   if (tokens.size() == 1) {  // then it stops reading
                                                     stalled.Notify();
                                                     go_on.WaitForNotificationWithTimeout(absl::Seconds(30));
                                                   }
                                                   return true;
                                                 }}),
                IsOk());
  });
  ASSERT_TRUE(stalled.WaitForNotificationWithTimeout(absl::Seconds(30)));
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (colocated->Stats().engine.num_paused != 1 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(colocated->Stats().engine.num_paused, 1) << "the stalled request kept its batch slot";
  EXPECT_EQ(colocated->Stats().engine.num_running, 0);
  go_on.Notify();
  caller.join();
  EXPECT_EQ(tokens, expected);
  EXPECT_EQ(colocated->Stats().engine.num_paused, 0);
}

TEST_F(WorkerTest, WaitersAreAdmittedInArrivalOrderEvenWhenALaterOneWouldFitSooner) {
  const std::vector<int32_t> big = Prompt(100, 1);   // 26 blocks with its next token
  const std::vector<int32_t> mid = Prompt(40, 2);    // 11 blocks: waits for `big`
  const std::vector<int32_t> small = Prompt(5, 3);   // 2 blocks: would fit beside `big`
  const PrefillResult big_kv = Prefill("big", big, Greedy(4));
  const PrefillResult mid_kv = Prefill("mid", mid, Greedy(4));
  const PrefillResult small_kv = Prefill("small", small, Greedy(4));

  BlockingRequest holder([&](std::function<void()> on_kv) {
    return Decode("big", big, Greedy(4), big_kv, absl::Seconds(30), std::move(on_kv));
  });
  ASSERT_TRUE(holder.WaitUntilHolding());

  DecodeLog mid_log;
  std::thread mid_thread([&] { mid_log = Decode("mid", mid, Greedy(4), mid_kv, absl::Seconds(30)); });
  ASSERT_TRUE(DecodeStatsReach([](const auto& s) { return s.num_requests_waiting_for_kv == 1; }));
  std::atomic<bool> big_released = false;
  std::atomic<bool> small_admitted_before_big_released = false;
  DecodeLog small_log;
  std::thread small_thread([&] {
    small_log = Decode("small", small, Greedy(4), small_kv, absl::Seconds(30),
                       [&] { small_admitted_before_big_released = !big_released; });
  });
  ASSERT_TRUE(DecodeStatsReach([](const auto& s) { return s.num_requests_waiting_for_kv == 2; }));
  // `small` fits in the 6 free blocks but queues behind `mid`.
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(decode_->Stats().num_requests_waiting_for_kv, 2);

  big_released = true;
  const DecodeLog big_log = holder.Finish();
  mid_thread.join();
  small_thread.join();
  for (const DecodeLog* log : std::vector<const DecodeLog*>{&big_log, &mid_log, &small_log}) {
    ASSERT_THAT(log->status, IsOk());
    EXPECT_EQ(log->tokens.size(), 4u);
  }
  EXPECT_TRUE(small_log.kv_transferred);
  EXPECT_FALSE(small_admitted_before_big_released);
  for (const char* id : {"big", "mid", "small"}) EXPECT_THAT(prefill_->Release(id), IsOk());
  EXPECT_TRUE(DecodePoolEmpty());
}

TEST_F(WorkerTest, AWaiterWithNoRoomBeforeItsDeadlineGetsDeadlineExceededAndLeaksNothing) {
  const std::vector<int32_t> big = Prompt(100, 1);
  const std::vector<int32_t> mid = Prompt(40, 2);
  const PrefillResult big_kv = Prefill("big", big, Greedy(4));
  const PrefillResult mid_kv = Prefill("mid", mid, Greedy(4));
  BlockingRequest holder([&](std::function<void()> on_kv) {
    return Decode("big", big, Greedy(4), big_kv, absl::Seconds(30), std::move(on_kv));
  });
  ASSERT_TRUE(holder.WaitUntilHolding());

  const DecodeLog mid_log = Decode("mid", mid, Greedy(4), mid_kv, absl::Milliseconds(100));
  EXPECT_THAT(mid_log.status, StatusIs(absl::StatusCode::kDeadlineExceeded,
                                       HasSubstr("no KV room before the deadline")));
  EXPECT_FALSE(mid_log.kv_transferred);
  // The id is free again, and the timed-out request is never admitted once room appears.
  ASSERT_THAT(holder.Finish().status, IsOk());
  EXPECT_TRUE(DecodePoolEmpty());
  const DecodeLog again = Decode("mid", mid, Greedy(4), mid_kv, absl::Seconds(30));
  ASSERT_THAT(again.status, IsOk());
  EXPECT_EQ(again.tokens.size(), 4u);
  for (const char* id : {"big", "mid"}) EXPECT_THAT(prefill_->Release(id), IsOk());
  EXPECT_TRUE(DecodePoolEmpty());
}

TEST_F(WorkerTest, AWaiterCancelledWhileQueuedGetsCancelledAndLeaksNothing) {
  const std::vector<int32_t> big = Prompt(100, 1);
  const std::vector<int32_t> mid = Prompt(40, 2);
  const PrefillResult big_kv = Prefill("big", big, Greedy(4));
  const PrefillResult mid_kv = Prefill("mid", mid, Greedy(4));
  BlockingRequest holder([&](std::function<void()> on_kv) {
    return Decode("big", big, Greedy(4), big_kv, absl::Seconds(30), std::move(on_kv));
  });
  ASSERT_TRUE(holder.WaitUntilHolding());

  DecodeLog mid_log;
  std::thread mid_thread([&] { mid_log = Decode("mid", mid, Greedy(4), mid_kv, absl::Seconds(30)); });
  ASSERT_TRUE(DecodeStatsReach([](const auto& s) { return s.num_requests_waiting_for_kv == 1; }));
  // Cancel is false until the serving thread has registered "mid"; on a loaded machine the waiting
  // count has been seen at 1 before that, so retry for a bounded time rather than once.
  const absl::Time cancelled_at = absl::Now();
  bool cancelled = decode_->Cancel("mid");
  while (!cancelled && absl::Now() - cancelled_at < absl::Seconds(5)) {
    absl::SleepFor(absl::Milliseconds(2));
    cancelled = decode_->Cancel("mid");
  }
  EXPECT_TRUE(cancelled);
  mid_thread.join();
  EXPECT_LT(absl::Now() - cancelled_at, absl::Seconds(1));
  EXPECT_THAT(mid_log.status, StatusIs(absl::StatusCode::kCancelled,
                                       HasSubstr("cancelled while waiting for KV room")));
  EXPECT_TRUE(DecodeStatsReach([](const auto& s) { return s.num_requests_waiting_for_kv == 0; }));
  ASSERT_THAT(holder.Finish().status, IsOk());
  for (const char* id : {"big", "mid"}) EXPECT_THAT(prefill_->Release(id), IsOk());
  EXPECT_TRUE(DecodePoolEmpty());
}

TEST_F(WorkerTest, AnInvalidHandedOffRequestIsRefusedWithoutWaitingForRoom) {
  const std::vector<int32_t> prompt = Prompt(10, 1);
  const PrefillResult prefilled = Prefill("r", prompt, Greedy(4));
  // The decode worker's max_model_len is 128: 10 + 200 tokens never fit.
  const DecodeLog log = Decode("r", prompt, Greedy(200), prefilled, absl::Seconds(30));
  EXPECT_THAT(log.status, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_model_len")));
  EXPECT_THAT(prefill_->Release("r"), IsOk());
  EXPECT_TRUE(DecodePoolEmpty());
}

TEST_F(WorkerTest, APullReadsOnlyWhileThePrefillWorkerHoldsTheKvForIt) {
  const std::vector<int32_t> prompt = Prompt(30, 3);
  PrefillResult prefilled = Prefill("r", prompt, Greedy(4));
  EXPECT_EQ(prefilled.kv.kv_grant.size(), KvGrants::kTokenBytes);
  prefilled.kv = OverTcp(prefilled.kv);
  // Another grant's bytes: the prefill worker's KV server refuses the pull, before any KV moves;
  // the decode worker says the source failed (Aborted), so the scheduler would prefill again.
  PrefillResult forged = prefilled;
  forged.kv.kv_grant[0] ^= 1;
  EXPECT_THAT(Decode("r", prompt, Greedy(4), forged, absl::Seconds(30)).status,
              StatusIs(absl::StatusCode::kAborted, HasSubstr("no live KV grant")));
  EXPECT_TRUE(DecodePoolEmpty());

  const DecodeLog log = Decode("r", prompt, Greedy(4), prefilled, absl::Seconds(30));
  ASSERT_THAT(log.status, IsOk());
  EXPECT_EQ(log.tokens.size(), 4u);
  // Released: the same hand-off reads nothing any more (the blocks may hold another request's KV).
  ASSERT_THAT(prefill_->Release("r"), IsOk());
  EXPECT_THAT(Decode("r", prompt, Greedy(4), prefilled, absl::Seconds(30)).status,
              StatusIs(absl::StatusCode::kAborted, HasSubstr("no live KV grant")));
  EXPECT_TRUE(DecodePoolEmpty());
}

TEST_F(WorkerTest, ACancelledRequestStopsAPullFromAFrozenSourceAtOnce) {
  const std::vector<int32_t> prompt = Prompt(30, 4);
  PrefillResult prefilled = Prefill("r", prompt, Greedy(4));
  // A source that accepts connections (the kernel's backlog) and never answers: a frozen process.
  absl::StatusOr<UniqueFd> frozen = ListenTcp("127.0.0.1", 0, 8);
  ASSERT_THAT(frozen, IsOk());
  KvHandoff handoff = OverTcp(prefilled.kv);
  for (KvSource& source : handoff.rank_sources) {
    source.tcp_address = absl::StrCat("127.0.0.1:", LocalPort(frozen->get()));
  }
  prefilled.kv = handoff;

  DecodeLog log;
  std::thread decoding([&] { log = Decode("r", prompt, Greedy(4), prefilled, absl::Seconds(60)); });
  ASSERT_TRUE(DecodeStatsReach([](const auto& s) { return s.engine.num_blocks_used > 0; }));
  absl::SleepFor(absl::Milliseconds(100));  // well into the pull
  const absl::Time cancelled_at = absl::Now();
  EXPECT_TRUE(decode_->Cancel("r"));
  decoding.join();
  EXPECT_LT(absl::Now() - cancelled_at, absl::Seconds(1));
  EXPECT_THAT(log.status, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_FALSE(log.kv_transferred);
  EXPECT_TRUE(DecodePoolEmpty());
  EXPECT_THAT(prefill_->Release("r"), IsOk());
}

}  // namespace
}  // namespace baton::runtime
