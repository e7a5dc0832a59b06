#include "scheduler/global/request_metrics.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Optional;
using ::testing::DoubleNear;

PreparedRequest Prepared() {
  PreparedRequest prepared;
  prepared.request.request_id = "req-7";
  prepared.prompt = {5, 6, 7, 8};
  prepared.arrival_us = 1'000'000;
  return prepared;
}

// The chunks of a disaggregated request as RequestFlow writes them: the first token with the
// arrival and prefill stamps, then the hand-off's stamps riding on the first decode chunk.
TEST(RequestMetricsRecorderTest, ADisaggregatedRequestsPhasesComeFromItsChunks) {
  RequestMetricsRecorder recorder(Prepared());
  GenerateChunk first;
  first.token_ids = {11};
  first.timing = {.arrival_us = 1'000'000, .prefill_start_us = 1'002'000, .prefill_end_us = 1'010'000,
                  .token_emit_us = {1'010'000}};
  recorder.OnChunk(first, 1'011'000);
  GenerateChunk decoded;
  decoded.token_ids = {12, 13};
  decoded.timing = {.kv_transfer_start_us = 1'013'000, .kv_transfer_end_us = 1'014'000,
                    .kv_transfer_bytes = 4096, .token_emit_us = {1'019'000, 1'024'000}};
  recorder.OnChunk(decoded, 1'025'000);
  GenerateChunk last;
  last.token_ids = {14};
  last.timing.token_emit_us = {1'030'000};
  last.finish_reason = runtime::FinishReason::kLength;
  recorder.OnChunk(last, 1'031'000);
  const RequestMetrics metrics = recorder.Finish(absl::OkStatus(), 1'032'000);

  EXPECT_EQ(metrics.request_id, "req-7");
  EXPECT_EQ(metrics.num_prompt_tokens, 4);
  EXPECT_EQ(metrics.num_generated_tokens, 4);
  EXPECT_EQ(metrics.finish_reason, runtime::FinishReason::kLength);
  EXPECT_EQ(metrics.kv_transfer_bytes, 4096);
  EXPECT_THAT(metrics.inter_token_us, ElementsAre(9'000, 5'000, 6'000));
  const RequestPhases phases = PhasesOf(metrics);
  EXPECT_THAT(phases.ttft, Optional(DoubleNear(0.011, 1e-9)));
  EXPECT_THAT(phases.e2e, Optional(DoubleNear(0.032, 1e-9)));
  EXPECT_THAT(phases.queue, Optional(DoubleNear(0.002, 1e-9)));
  EXPECT_THAT(phases.prefill, Optional(DoubleNear(0.008, 1e-9)));
  EXPECT_THAT(phases.handoff_wait, Optional(DoubleNear(0.003, 1e-9)));
  EXPECT_THAT(phases.kv_transfer, Optional(DoubleNear(0.001, 1e-9)));
  EXPECT_THAT(phases.first_decode_step, Optional(DoubleNear(0.005, 1e-9)));

  EXPECT_EQ(RequestLogLine(metrics),
            "request request_id=req-7 outcome=finished finish_reason=length prompt_tokens=4 "
            "generated_tokens=4 ttft_ms=11.000 e2e_ms=32.000 queue_ms=2.000 prefill_ms=8.000 "
            "handoff_wait_ms=3.000 kv_transfer_ms=1.000 first_decode_step_ms=5.000 "
            "kv_transfer_bytes=4096 mean_itl_ms=6.667");
}

// A request the first token finished (max_tokens 1) had no hand-off: those phases are absent.
TEST(RequestMetricsRecorderTest, PhasesThatDidNotHappenAreAbsent) {
  RequestMetricsRecorder recorder(Prepared());
  GenerateChunk only;
  only.token_ids = {11};
  only.timing = {.arrival_us = 1'000'000, .prefill_start_us = 1'002'000, .prefill_end_us = 1'010'000,
                 .token_emit_us = {1'010'000}};
  only.finish_reason = runtime::FinishReason::kStop;
  recorder.OnChunk(only, 1'011'000);
  const RequestMetrics metrics = recorder.Finish(absl::OkStatus(), 1'012'000);
  const RequestPhases phases = PhasesOf(metrics);
  EXPECT_TRUE(phases.prefill.has_value());
  EXPECT_FALSE(phases.handoff_wait.has_value());
  EXPECT_FALSE(phases.kv_transfer.has_value());
  EXPECT_FALSE(phases.first_decode_step.has_value());
  EXPECT_TRUE(metrics.inter_token_us.empty());
  const std::string line = RequestLogLine(metrics);
  EXPECT_THAT(line, HasSubstr("finish_reason=stop"));
  EXPECT_THAT(line, Not(HasSubstr("kv_transfer")));
  EXPECT_THAT(line, Not(HasSubstr("mean_itl_ms")));
}

// A resumed request (its prefill worker died) prefills again: the client's first token came from
// the first prefill, whose stamps stay.
TEST(RequestMetricsRecorderTest, TheFirstPrefillsStampsWin) {
  RequestMetricsRecorder recorder(Prepared());
  GenerateChunk first;
  first.token_ids = {11};
  first.timing = {.prefill_start_us = 1'002'000, .prefill_end_us = 1'010'000};
  recorder.OnChunk(first, 1'011'000);
  GenerateChunk again;
  again.token_ids = {12};
  again.timing = {.prefill_start_us = 1'500'000, .prefill_end_us = 1'600'000};
  recorder.OnChunk(again, 1'601'000);
  const RequestMetrics metrics = recorder.Finish(absl::UnavailableError("x"), 1'700'000);
  EXPECT_EQ(metrics.prefill_start_us, 1'002'000);
  EXPECT_EQ(metrics.first_token_us, 1'011'000);
}

TEST(RequestMetricsRecorderTest, FailuresAndCancellationsSayWhat) {
  RequestMetricsRecorder failed_recorder(Prepared());
  const RequestMetrics failed =
      failed_recorder.Finish(absl::UnavailableError("no live decode worker (waited 10s)"), 1'100'000);
  EXPECT_EQ(RequestLogLine(failed),
            "request request_id=req-7 outcome=failed code=UNAVAILABLE "
            "error=\"no live decode worker (waited 10s)\" prompt_tokens=4 generated_tokens=0 e2e_ms=100.000");
  RequestMetricsRecorder cancelled_recorder(Prepared());
  EXPECT_THAT(RequestLogLine(cancelled_recorder.Finish(absl::CancelledError("client cancelled"), 1'100'000)),
              HasSubstr("outcome=cancelled prompt_tokens=4"));
}

TEST(RequestMetricsTest, FinishedReasonLabelsAreVllms) {
  EXPECT_STREQ(FinishedReasonLabel(runtime::FinishReason::kStop), "stop");
  EXPECT_STREQ(FinishedReasonLabel(runtime::FinishReason::kLength), "length");
  EXPECT_STREQ(FinishedReasonLabel(runtime::FinishReason::kCancelled), "abort");
  EXPECT_EQ(FinishedReasonLabel(runtime::FinishReason::kNone), nullptr);
}

}  // namespace
}  // namespace baton::scheduler
