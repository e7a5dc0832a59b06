#include "scheduler/service/metrics.h"

#include <string>

#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::scheduler {
namespace {

using ::testing::Contains;
using ::testing::Not;
using ::testing::HasSubstr;

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

RequestMetrics Finished(int num_prompt_tokens, int num_generated_tokens) {
  RequestMetrics m{.request_id = "r", .num_prompt_tokens = num_prompt_tokens,
                   .num_generated_tokens = num_generated_tokens,
                   .finish_reason = runtime::FinishReason::kLength,
                   .arrival_us = 1'000'000, .first_token_us = 1'020'000, .end_us = 1'500'000,
                   .prefill_start_us = 1'001'000, .prefill_end_us = 1'019'000,
                   .kv_transfer_start_us = 1'021'000, .kv_transfer_end_us = 1'022'000,
                   .kv_transfer_bytes = 8192, .second_token_emit_us = 1'030'000};
  for (int i = 1; i < num_generated_tokens; ++i) m.inter_token_us.push_back(20'000);
  return m;
}

TEST(ServingMetricsTest, CountsTokensRequestsAndOutcomes) {
  WorkerRegistry registry({}, absl::Seconds(1));
  ServingMetrics metrics(&registry, "m");
  metrics.Record(Finished(5, 4));
  metrics.Record(Finished(7, 3));
  RequestMetrics failed{.num_prompt_tokens = 2, .status = absl::UnavailableError("gone"),
                        .arrival_us = 1'000'000, .end_us = 1'100'000};
  metrics.Record(failed);
  RequestMetrics cancelled{.num_prompt_tokens = 1, .num_generated_tokens = 1,
                           .status = absl::CancelledError("client cancelled")};
  metrics.Record(cancelled);

  const std::vector<std::string> lines = Lines(metrics.Scrape());
  EXPECT_THAT(lines, Contains("# TYPE baton:prompt_tokens_total counter"));
  EXPECT_THAT(lines, Contains("baton:prompt_tokens_total{model_name=\"m\"} 15"));
  EXPECT_THAT(lines, Contains("baton:generation_tokens_total{model_name=\"m\"} 8"));
  EXPECT_THAT(lines, Contains("baton:request_success_total{finished_reason=\"length\",model_name=\"m\"} 2"));
  EXPECT_THAT(lines, Contains("baton:request_success_total{finished_reason=\"abort\",model_name=\"m\"} 1"));
  EXPECT_THAT(lines, Contains("baton:request_failure_total{code=\"UNAVAILABLE\",model_name=\"m\"} 1"));
  EXPECT_THAT(lines, Contains("# TYPE baton:time_to_first_token_seconds histogram"));
  EXPECT_THAT(lines, Contains("baton:time_to_first_token_seconds_count{model_name=\"m\"} 2"));
  EXPECT_THAT(lines, Contains("baton:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.02\"} 2"));
  EXPECT_THAT(lines, Contains("baton:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.01\"} 0"));
  EXPECT_THAT(lines, Contains("baton:e2e_request_latency_seconds_count{model_name=\"m\"} 2"));  // finished ones only
  EXPECT_THAT(lines, Contains("baton:inter_token_latency_seconds_count{model_name=\"m\"} 5"));
  EXPECT_THAT(lines, Contains("baton:time_per_output_token_seconds_count{model_name=\"m\"} 5"));
  EXPECT_THAT(lines, Contains("baton:request_time_per_output_token_seconds_count{model_name=\"m\"} 2"));
  EXPECT_THAT(lines, Contains("baton:kv_transfer_bytes_count{model_name=\"m\"} 2"));
  EXPECT_THAT(lines, Contains("baton:kv_transfer_bytes_sum{model_name=\"m\"} 16384"));
  EXPECT_THAT(lines, Contains("baton:kv_transfer_time_seconds_count{model_name=\"m\"} 2"));
  EXPECT_THAT(lines, Contains("baton:request_queue_time_seconds_count{model_name=\"m\"} 2"));
  EXPECT_THAT(lines, Contains("baton:request_prefill_time_seconds_count{model_name=\"m\"} 2"));
  for (const std::string& line : lines) {  // every sample names the model, as vLLM's
    if (!line.empty() && line[0] != '#') EXPECT_THAT(line, HasSubstr("model_name=\"m\"")) << line;
  }
  for (const char* phase : {"queue", "prefill", "handoff_wait", "kv_transfer", "first_decode_step"}) {
    EXPECT_THAT(lines, Contains(absl::StrCat("baton:request_phase_seconds_count{model_name=\"m\",phase=\"", phase, "\"} 2")));
  }
}

TEST(ServingMetricsTest, GaugesPerLiveInstanceFromTheHeartbeats) {
  WorkerRegistry registry({{WorkerRole::kPrefill, 2}, {WorkerRole::kDecode, 1}}, absl::Seconds(1));
  const absl::Time now = absl::Now();
  registry.Register({.role = WorkerRole::kPrefill, .instance_idx = 0, .incarnation_id = "p0", .address = "a"}, now);
  registry.Register({.role = WorkerRole::kPrefill, .instance_idx = 1, .incarnation_id = "p1", .address = "b"}, now);
  registry.Register({.role = WorkerRole::kDecode, .instance_idx = 0, .incarnation_id = "d0", .address = "c"}, now);
  registry.Heartbeat("p0", {.num_kv_blocks_total = 100, .num_kv_blocks_used = 10, .num_requests_waiting = 3,
                            .num_requests_running = 1, .num_requests_holding_kv = 2}, now);
  registry.Heartbeat("d0", {.num_kv_blocks_total = 200, .num_kv_blocks_used = 50, .num_requests_waiting = 0,
                            .num_requests_running = 4, .num_requests_swapped = 5}, now);
  registry.MarkDead("p1", "gone");
  ServingMetrics metrics(&registry, "m");

  const std::string text = metrics.Scrape();
  const std::vector<std::string> lines = Lines(text);
  EXPECT_THAT(lines, Contains("# TYPE baton:num_requests_running gauge"));
  EXPECT_THAT(lines, Contains("baton:num_requests_running{instance=\"0\",model_name=\"m\",role=\"decode\"} 4"));
  EXPECT_THAT(lines, Contains("baton:num_requests_running{instance=\"0\",model_name=\"m\",role=\"prefill\"} 1"));
  EXPECT_THAT(lines, Contains("baton:num_requests_waiting{instance=\"0\",model_name=\"m\",role=\"prefill\"} 3"));
  EXPECT_THAT(lines, Contains("baton:kv_cache_usage_perc{instance=\"0\",model_name=\"m\",role=\"decode\"} 0.25"));
  EXPECT_THAT(lines, Contains("baton:kv_cache_usage_perc{instance=\"0\",model_name=\"m\",role=\"prefill\"} 0.1"));
  EXPECT_THAT(lines, Contains("baton:kv_handoff_queue_depth{instance=\"0\",model_name=\"m\",role=\"prefill\"} 2"));
  EXPECT_THAT(lines, Contains("baton:num_requests_swapped{instance=\"0\",model_name=\"m\",role=\"decode\"} 5"));
  EXPECT_THAT(lines, Contains("baton:num_requests_swapped{instance=\"0\",model_name=\"m\",role=\"prefill\"} 0"));
  // Only prefill instances hold KV for a hand-off; a dead instance has no series.
  EXPECT_THAT(text, Not(HasSubstr("baton:kv_handoff_queue_depth{instance=\"0\",model_name=\"m\",role=\"decode\"}")));
  EXPECT_THAT(text, Not(HasSubstr("instance=\"1\"")));
}

}  // namespace
}  // namespace baton::scheduler
