// The JSONL records round-trip, carry the derived metrics for the Python analysis, and malformed
// files name the line.
#include "benchmarks/bench/record_io.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace baton::bench {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;

std::filesystem::path TempPath(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                    ("baton_record_io_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

RequestRecord Example() {
  RequestRecord r;
  r.request_idx = 4;
  r.warmup = false;
  r.input_len = 12;
  r.output_len = 3;
  r.arrival_s = 1.0;
  r.sent_s = 1.001;
  r.end_s = 1.6;
  r.token_s = {1.2, 1.4, 1.6};
  r.num_output_tokens = 3;
  r.num_prompt_tokens = 12;
  r.ok = true;
  r.finish_reason = "length";
  r.server = ServerTiming{.arrival_us = 10,
                          .prefill_start_us = 20,
                          .prefill_end_us = 50,
                          .kv_transfer_start_us = 55,
                          .kv_transfer_end_us = 60,
                          .token_emit_us = {50, 80, 90}};
  return r;
}

TEST(RecordIoTest, RoundTripAndDerivedFields) {
  RequestRecord failed;
  failed.request_idx = 5;
  failed.error = "UNAVAILABLE: gone";
  const std::filesystem::path path = TempPath("records.jsonl");
  ASSERT_THAT(WriteRecordsJsonl(path, {Example(), failed}), IsOk());
  absl::StatusOr<std::vector<RequestRecord>> back = ReadRecordsJsonl(path);
  ASSERT_THAT(back, IsOk());
  ASSERT_EQ(back->size(), 2u);
  const RequestRecord& r = (*back)[0];
  EXPECT_EQ(r.request_idx, 4);
  EXPECT_EQ(r.token_s, Example().token_s);
  EXPECT_EQ(r.finish_reason, "length");
  ASSERT_TRUE(r.server.has_value());
  EXPECT_EQ(r.server->token_emit_us, Example().server->token_emit_us);
  EXPECT_EQ((*back)[1].error, "UNAVAILABLE: gone");
  EXPECT_FALSE((*back)[1].server.has_value());

  const nlohmann::json j = RecordToJson(Example());
  EXPECT_NEAR(j["ttft_s"].get<double>(), 0.2, 1e-12);
  EXPECT_NEAR(j["tpot_s"].get<double>(), 0.2, 1e-12);
  EXPECT_NEAR(j["e2e_s"].get<double>(), 0.6, 1e-12);
  EXPECT_NEAR(j["phases"]["prefill_s"].get<double>(), 30e-6, 1e-12);
  EXPECT_NEAR(j["phases"]["first_decode_s"].get<double>(), 20e-6, 1e-12);
  EXPECT_FALSE(RecordToJson(failed).contains("ttft_s"));
}

TEST(RecordIoTest, SummaryJsonHasTheFigures) {
  const RunSummary s = Summarize({Example()}, {.max_concurrency = 4},
                                 {.label = "x", .slo = Slo{.ttft_s = 1, .tpot_s = 1}});
  const nlohmann::json j = SummaryToJson(s);
  EXPECT_EQ(j["label"], "x");
  EXPECT_EQ(j["num_completed"], 1);
  EXPECT_DOUBLE_EQ(j["attainment"].get<double>(), 1.0);
  EXPECT_EQ(j["slo_scales"].size(), DefaultSloScales().size());
  EXPECT_TRUE(j["kv_transfer_s"].is_object());
  EXPECT_EQ(j["dispatch"]["max_concurrency"], 4);
}

TEST(RecordIoTest, MalformedLinesNameTheLine) {
  const std::filesystem::path path = TempPath("bad.jsonl");
  std::ofstream(path) << RecordToJson(Example()).dump() << "\n{\"request_idx\": 1}\n";
  EXPECT_THAT(ReadRecordsJsonl(path),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bad.jsonl:2")));
  EXPECT_THAT(ReadRecordsJsonl(TempPath("missing.jsonl")), StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace baton::bench
