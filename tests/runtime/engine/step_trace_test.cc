// Step records and traces (step_trace.h): the engine reports each finished step's shape and times
// to its observer, and StepTraceWriter writes them as JSON lines after a header.
#include "runtime/engine/step_trace.h"

#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/engine/engine.h"
#include "tests/testing/engine_requests.h"
#include "tests/testing/safetensors_writer.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using testing::Greedy;
using testing::Prompt;

TEST(StepTraceTest, TheEngineReportsEachStepsShapeAndTimes) {
  testing::ScopedTempDir dir;
  ASSERT_THAT(testing::WriteTinyModel(dir.path(), testing::TinyEngineSpec()), IsOk());
  auto engine = Engine::Create(EngineConfig{.model_dir = dir.path(), .block_size = 4,
                                            .kv_cache_bytes = 1 << 20, .max_num_batched_tokens = 8,
                                            .chunked_prefill = true, .max_model_len = 64});
  ASSERT_THAT(engine, IsOk());
  std::vector<StepRecord> records;
  (*engine)->SetStepObserver([&](const StepRecord& r) { records.push_back(r); });
  ASSERT_THAT((*engine)->AddRequest(Prompt(6, 0), Greedy(3)), IsOk());
  ASSERT_THAT((*engine)->AddRequest(Prompt(5, 1), Greedy(2)), IsOk());
  while ((*engine)->HasWork()) ASSERT_THAT((*engine)->Step(), IsOk());
  // Budget 8: 6 + 2 of the second prompt; then its other 3 beside the first's decode (context 7);
  // then both decode (contexts 8 and 6), which ends both.
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].prompt_tokens, 8);
  EXPECT_DOUBLE_EQ(records[0].prompt_tokens_squared, 6 * 6 + 2 * 2);
  EXPECT_EQ(records[0].decode_seqs, 0);
  EXPECT_EQ(records[1].prompt_tokens, 3);
  EXPECT_DOUBLE_EQ(records[1].prompt_tokens_squared, 3 * (3 + 2 * 2)) << "a chunk after 2 computed tokens";
  EXPECT_EQ(records[1].decode_seqs, 1);
  EXPECT_EQ(records[1].decode_context, 7);
  EXPECT_EQ(records[2].decode_seqs, 2);
  EXPECT_EQ(records[2].decode_context, 8 + 6);
  EXPECT_EQ(records[2].prompt_tokens, 0);
  EXPECT_TRUE(records[0].busy_after);
  EXPECT_TRUE(records[1].busy_after);
  EXPECT_FALSE(records[2].busy_after) << "both requests finished";
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_LE(records[i].start_us, records[i].end_us);
    if (i > 0) {
      EXPECT_LE(records[i - 1].end_us, records[i].start_us);
    }
  }
}

TEST(StepTraceTest, TheWriterWritesAHeaderThenAStepPerLine) {
  testing::ScopedTempDir dir;
  const std::filesystem::path path = dir.path() / "decode-0.jsonl";
  {
    auto writer = StepTraceWriter::Create(
        path, {.role = "decode", .instance = 0, .tp = 2, .pp = 1, .device = "cpu"});
    ASSERT_THAT(writer, IsOk());
    (*writer)->Append({.start_us = 10, .end_us = 25, .decode_seqs = 3, .decode_context = 90});
    (*writer)->Append({.start_us = 30, .end_us = 70, .prompt_tokens = 12, .prompt_tokens_squared = 144});
  }
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["role"], "decode");
  EXPECT_EQ(lines[0]["tp"], 2);
  EXPECT_EQ(lines[0]["pp"], 1);
  EXPECT_GT(lines[0]["pid"].get<int>(), 0);
  EXPECT_EQ(lines[1]["decode_seqs"], 3);
  EXPECT_EQ(lines[1]["decode_context"], 90);
  EXPECT_EQ(lines[2]["end_us"], 70);
  EXPECT_EQ(lines[2]["prompt_tokens_squared"], 144.0);
  EXPECT_EQ(lines[2]["busy_after"], false);
  EXPECT_FALSE(StepTraceWriter::Create(dir.path() / "missing" / "x.jsonl", {}).ok());
}

}  // namespace
}  // namespace baton::runtime
