// Workloads, prompts and plans: the shipped workload files load with the counts their sources
// give, lengths fit the model's context, prompts have exactly the planned length, and a seed fixes
// the whole plan.
#include "benchmarks/bench/workload.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "benchmarks/bench/plan.h"
#include "benchmarks/bench/prompt_corpus.h"
#include "benchmarks/bench/trace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/runtime/tokenizer/tokenizer_test_util.h"
#include "tests/testing/status_matchers.h"

namespace baton::bench {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;

std::filesystem::path WorkloadDir() {
  return std::filesystem::path(BATON_TEST_SOURCE_DIR) / "benchmarks" / "workloads";
}

std::filesystem::path TempDir() {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                    ("baton_workload_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

std::filesystem::path WriteFile(const std::string& name, const std::string& contents) {
  const std::filesystem::path path = TempDir() / name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

// A byte-level tokenizer (about one token per byte), enough to count and cut real text.
std::unique_ptr<runtime::Tokenizer> ByteTokenizer() {
  return runtime::testing::LoadTokenizer(runtime::testing::Gpt2StyleJson());
}

TEST(WorkloadTest, ChatbotKeepsDistServesShareGptFilter) {
  absl::StatusOr<WorkloadDefinition> chatbot =
      LoadWorkloadDefinition(WorkloadDir() / "chatbot.yaml", nullptr);
  ASSERT_THAT(chatbot, IsOk());
  // shared/data/README.md: 30,731 rows, 14,561 after the filter; prompt mean 606, output mean 396.
  EXPECT_EQ(chatbot->num_pool_rows, 30731);
  EXPECT_EQ(chatbot->pool.size(), 14561u);
  EXPECT_EQ(chatbot->num_filtered, 30731 - 14561);
  double input_sum = 0;
  double output_sum = 0;
  for (const WorkloadItem& item : chatbot->pool) {
    EXPECT_LT(item.input_len + item.output_len, 2048);
    EXPECT_FALSE(item.input_len < 4 && item.output_len < 4);
    input_sum += item.input_len;
    output_sum += item.output_len;
  }
  EXPECT_NEAR(input_sum / chatbot->pool.size(), 606, 1);
  EXPECT_NEAR(output_sum / chatbot->pool.size(), 396, 1);
}

TEST(WorkloadTest, CodeTokenizesHumanEvalWithTheServedTokenizer) {
  auto tokenizer = ByteTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_THAT(LoadWorkloadDefinition(WorkloadDir() / "code.yaml", nullptr),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("tokenizer")));
  absl::StatusOr<WorkloadDefinition> code =
      LoadWorkloadDefinition(WorkloadDir() / "code.yaml", tokenizer.get());
  ASSERT_THAT(code, IsOk());
  EXPECT_EQ(code->num_pool_rows, 164);
  EXPECT_EQ(code->pool.size() + code->num_filtered, 164u);
  EXPECT_GT(code->pool.size(), 150u);
  for (const WorkloadItem& item : code->pool) {
    EXPECT_EQ(item.input_len, static_cast<int>(item.prompt_ids.size()));
    EXPECT_GE(item.output_len, 1);
    EXPECT_LT(item.input_len + item.output_len, 2048);
  }
  // HumanEval/0's prompt, byte by byte: "from typing import List..."
  EXPECT_EQ(tokenizer->Decode(code->pool.front().prompt_ids, false).substr(0, 23),
            "from typing import List");
}

TEST(WorkloadTest, SummarizationClipsInputsLikeDistServe) {
  absl::StatusOr<WorkloadDefinition> summarization =
      LoadWorkloadDefinition(WorkloadDir() / "summarization.yaml", nullptr);
  ASSERT_THAT(summarization, IsOk());
  EXPECT_FALSE(summarization->is_pool());
  Rng rng(1);
  for (const WorkloadItem& item : SampleWorkload(*summarization, 2000, rng)) {
    EXPECT_GE(item.output_len, 100);
    EXPECT_LE(item.output_len, 300);
    EXPECT_LE(item.input_len + item.output_len, 2040);
    EXPECT_GE(item.input_len, 1900 - 300);
    EXPECT_LE(item.input_len, 2048);
  }
}

TEST(WorkloadTest, FitToContextDropsPoolEntriesAndClipsParametricInputs) {
  WorkloadDefinition chatbot = *LoadWorkloadDefinition(WorkloadDir() / "chatbot.yaml", nullptr);
  absl::StatusOr<ContextFitReport> fit = FitToContext(chatbot, 1024);
  ASSERT_THAT(fit, IsOk());
  EXPECT_EQ(fit->num_pool_kept + fit->num_pool_dropped, 14561);
  EXPECT_GT(fit->num_pool_dropped, 0);
  EXPECT_THAT(fit->ToString(), HasSubstr("max_model_len 1024"));
  for (const WorkloadItem& item : chatbot.pool) EXPECT_LE(item.input_len + item.output_len, 1024);

  WorkloadDefinition random = MakeRandomWorkload({100, 900}, {10, 200});
  fit = FitToContext(random, 512);
  ASSERT_THAT(fit, IsOk());
  EXPECT_TRUE(fit->inputs_clipped);
  Rng rng(2);
  for (const WorkloadItem& item : SampleWorkload(random, 1000, rng)) {
    EXPECT_LE(item.input_len + item.output_len, 512);
    EXPECT_GE(item.input_len, 1);
  }
  WorkloadDefinition summarization =
      *LoadWorkloadDefinition(WorkloadDir() / "summarization.yaml", nullptr);
  // Its own 2040-token rule is its definition, not a context fit.
  WorkloadDefinition fits = summarization;
  EXPECT_FALSE(FitToContext(fits, 2048)->inputs_clipped);
  EXPECT_EQ(fits.max_total_len, 2040);
  EXPECT_THAT(FitToContext(summarization, 300),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no room")));
  EXPECT_THAT(FitToContext(chatbot, 3), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(WorkloadTest, RandomWorkloadLengthsAreUniformInTheirRange) {
  const WorkloadDefinition fixed = MakeRandomWorkload({64, 64}, {32, 32});
  Rng rng(3);
  for (const WorkloadItem& item : SampleWorkload(fixed, 100, rng)) {
    EXPECT_EQ(item.input_len, 64);
    EXPECT_EQ(item.output_len, 32);
  }
  const WorkloadDefinition uniform = MakeRandomWorkload({10, 19}, {1, 1});
  std::vector<int> counts(10, 0);
  for (const WorkloadItem& item : SampleWorkload(uniform, 10000, rng))
    ++counts[item.input_len - 10];
  for (int count : counts) EXPECT_NEAR(count, 1000, 150);
}

TEST(WorkloadTest, ParseLengthRange) {
  EXPECT_EQ(ParseLengthRange("128")->min_len, 128);
  EXPECT_EQ(ParseLengthRange("128")->max_len, 128);
  EXPECT_EQ(ParseLengthRange("64:256")->max_len, 256);
  for (const char* bad : {"", "0", "5:4", "a", "1:2:3", "-3"}) {
    EXPECT_THAT(ParseLengthRange(bad), StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
  }
}

TEST(WorkloadTest, MalformedFilesNameTheProblem) {
  EXPECT_THAT(LoadWorkloadDefinition(TempDir() / "missing.yaml", nullptr),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(LoadWorkloadDefinition(WriteFile("unknown.yaml",
                                               "name: x\ninput_len: {min: 1, max: 2}\n"
                                               "output_len: {min: 1, max: 2}\nspeed: 3\n"),
                                     nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown key 'speed'")));
  EXPECT_THAT(LoadWorkloadDefinition(WriteFile("none.yaml", "name: x\n"), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exactly one")));
  EXPECT_THAT(LoadWorkloadDefinition(WriteFile("range.yaml",
                                               "name: x\ninput_len: {min: 5, max: 2}\n"
                                               "output_len: {min: 1, max: 2}\n"),
                                     nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("input_len")));
  WriteFile("lengths.csv", "in,out\n5,5\n3000,10\n");
  EXPECT_THAT(LoadWorkloadDefinition(
                  WriteFile("empty.yaml",
                            "name: x\nlengths_csv: {file: lengths.csv, input_column: in, "
                            "output_column: out}\nfilter: {drop_if_total_at_least: 5}\n"),
                  nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("leaves no request")));
  EXPECT_THAT(LoadWorkloadDefinition(
                  WriteFile("column.yaml",
                            "name: x\nlengths_csv: {file: lengths.csv, input_column: prompt, "
                            "output_column: out}\n"),
                  nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no column 'prompt'")));
  EXPECT_THAT(LoadWorkloadDefinition(WriteFile("yaml.yaml", "name: [unclosed\n"), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(PromptCorpusTest, PromptsHaveTheExactLengthAndStartWithThePrefix) {
  const PromptCorpus corpus({10, 11, 12, 13, 14}, {1});
  Rng rng(0);
  for (int n : {1, 2, 5, 12}) {
    const std::vector<int32_t> ids = corpus.Build(n, rng);
    ASSERT_EQ(ids.size(), static_cast<size_t>(n));
    EXPECT_EQ(ids[0], 1);
    // The rest is a contiguous window of the stream, wrapping around.
    for (size_t i = 2; i < ids.size(); ++i) {
      EXPECT_EQ(ids[i], 10 + (ids[i - 1] - 10 + 1) % 5);
    }
  }
}

TEST(PromptCorpusTest, CreateTokenizesRealText) {
  auto tokenizer = ByteTokenizer();
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  const std::filesystem::path dir = TempDir() / "corpus";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "a.txt") << text;
  absl::StatusOr<std::unique_ptr<PromptCorpus>> corpus = PromptCorpus::Create(*tokenizer, dir);
  ASSERT_THAT(corpus, IsOk());
  EXPECT_GE((*corpus)->num_stream_tokens(), 1024);
  Rng rng(4);
  const std::vector<int32_t> ids = (*corpus)->Build(300, rng);
  ASSERT_EQ(ids.size(), 300u);
  EXPECT_THAT(tokenizer->Decode(ids, false), ::testing::AnyOf(HasSubstr("fox"), HasSubstr("dog")));
  EXPECT_THAT(PromptCorpus::Create(*tokenizer, dir / "missing"),
              StatusIs(absl::StatusCode::kNotFound));
  std::ofstream(dir / "short.txt") << "tiny";
  EXPECT_THAT(PromptCorpus::Create(*tokenizer, dir / "short.txt"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tokens")));
}

TEST(PlanTest, SeedFixesThePlanAndTheRateOnlyScalesTime) {
  const WorkloadDefinition workload = MakeRandomWorkload({5, 40}, {1, 9});
  const PromptCorpus corpus(std::vector<int32_t>(500, 7), {1});
  const PlanOptions options{.num_requests = 50, .num_warmup = 5, .seed = 12};
  absl::StatusOr<std::vector<PlannedRequest>> slow =
      PlanWorkload(workload, {.rate_per_s = 1}, options, &corpus);
  absl::StatusOr<std::vector<PlannedRequest>> fast =
      PlanWorkload(workload, {.rate_per_s = 4}, options, &corpus);
  ASSERT_THAT(slow, IsOk());
  ASSERT_THAT(fast, IsOk());
  ASSERT_EQ(slow->size(), 50u);
  for (size_t i = 0; i < slow->size(); ++i) {
    const PlannedRequest& s = (*slow)[i];
    const PlannedRequest& f = (*fast)[i];
    EXPECT_EQ(s.request_idx, static_cast<int>(i));
    EXPECT_EQ(s.warmup, i < 5);
    EXPECT_EQ(s.prompt_ids.size(), static_cast<size_t>(s.input_len));
    EXPECT_EQ(s.prompt_ids, f.prompt_ids);
    EXPECT_EQ(s.output_len, f.output_len);
    EXPECT_NEAR(f.arrival_s, s.arrival_s / 4, 1e-9 * (1 + s.arrival_s));
  }
  const std::vector<PlannedRequest> other =
      *PlanWorkload(workload, {.rate_per_s = 1}, {.num_requests = 50, .seed = 13}, &corpus);
  EXPECT_NE(other[3].input_len + other[4].input_len * 100 + other[5].input_len * 10000,
            (*slow)[3].input_len + (*slow)[4].input_len * 100 + (*slow)[5].input_len * 10000);
  EXPECT_THAT(
      PlanWorkload(workload, {.rate_per_s = 1}, {.num_requests = 5, .num_warmup = 5}, &corpus),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("warm-up")));
  EXPECT_THAT(PlanWorkload(workload, {.rate_per_s = 1}, {.num_requests = 5}, nullptr),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(TraceTest, LoadsSortsAndReplaysATrace) {
  auto tokenizer = ByteTokenizer();
  const std::filesystem::path path = WriteFile(
      "trace.jsonl",
      "{\"arrival_s\": 12.0, \"input_len\": 30, \"output_len\": 4}\n"
      "\n"
      "{\"arrival_s\": 10.0, \"prompt\": \"hello the\", \"output_len\": 2, \"note\": \"x\"}\n"
      "{\"arrival_s\": 14.0, \"input_len\": 900, \"output_len\": 200}\n");
  absl::StatusOr<std::vector<TraceEntry>> trace = LoadTrace(path, tokenizer.get());
  ASSERT_THAT(trace, IsOk());
  ASSERT_EQ(trace->size(), 3u);
  EXPECT_EQ((*trace)[0].arrival_s, 0.0);
  EXPECT_EQ((*trace)[0].item.prompt_ids, tokenizer->Encode("hello the", true));
  EXPECT_EQ((*trace)[1].arrival_s, 2.0);
  EXPECT_EQ((*trace)[2].item.input_len, 900);

  const PromptCorpus corpus(std::vector<int32_t>(100, 7), {});
  absl::StatusOr<TracePlan> plan =
      PlanTrace(*trace, {.rate_per_s = 2.0, .max_model_len = 1000}, &corpus);
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->num_clipped, 1);
  EXPECT_EQ(plan->requests[2].input_len, 800);
  EXPECT_EQ(plan->requests[2].prompt_ids.size(), 800u);
  EXPECT_DOUBLE_EQ(plan->requests[1].arrival_s, 0.5);  // 2 gaps over 4 s rescaled to 2 req/s
  EXPECT_DOUBLE_EQ(plan->requests[2].arrival_s, 1.0);
  EXPECT_THAT(PlanTrace(*trace, {.max_model_len = 150}, &corpus),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("output_len 200")));
}

TEST(TraceTest, MalformedLinesNameTheLine) {
  const struct {
    const char* line;
    const char* message;
  } cases[] = {
      {"{\"input_len\": 3, \"output_len\": 1}", ":1: arrival_s"},
      {"{\"arrival_s\": 1, \"input_len\": 3}", ":1: output_len"},
      {"{\"arrival_s\": 1, \"input_len\": 3, \"prompt\": \"a\", \"output_len\": 1}", "exactly one"},
      {"{\"arrival_s\": -1, \"input_len\": 3, \"output_len\": 1}", "arrival_s"},
      {"not json", "not a JSON object"},
  };
  for (const auto& c : cases) {
    EXPECT_THAT(LoadTrace(WriteFile("bad.jsonl", c.line), nullptr),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.line;
  }
  EXPECT_THAT(LoadTrace(WriteFile("prompt.jsonl",
                                  "{\"arrival_s\": 1, \"prompt\": \"a\", \"output_len\": 1}"),
                        nullptr),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(LoadTrace(WriteFile("empty.jsonl", "\n"), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty")));
}

}  // namespace
}  // namespace baton::bench
