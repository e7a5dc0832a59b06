// vLLM's benchmark spellings that `baton bench` accepts: --dataset-name, --goodput, and the URL that
// --backend and --endpoint make.
#include "benchmarks/bench/vllm_flags.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace baton::bench {
namespace {

using ::absl_testing::IsOkAndHolds;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;

TEST(VllmFlagsTest, DatasetNames) {
  EXPECT_THAT(WorkloadOfDataset("sharegpt"), IsOkAndHolds("chatbot"));
  EXPECT_THAT(WorkloadOfDataset("random"), IsOkAndHolds("random"));
  for (const char* name : {"sonnet", "burstgpt", "hf", "custom", "ShareGPT", ""}) {
    EXPECT_THAT(WorkloadOfDataset(name),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("expected sharegpt (= --workload chatbot), random (= --workload random) or prefix_repetition")))
        << name;
  }
}

TEST(VllmFlagsTest, Goodput) {
  absl::StatusOr<GoodputSlo> slo = ParseGoodput({"ttft:500", "tpot:12.5"});
  ASSERT_TRUE(slo.ok()) << slo.status();
  EXPECT_EQ(slo->ttft_ms, 500);
  EXPECT_EQ(slo->tpot_ms, 12.5);
  EXPECT_EQ(ParseGoodput({"tpot:1", "ttft:2"})->ttft_ms, 2);

  struct Case {
    std::vector<std::string> items;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"ttft:500"}, "--goodput needs both ttft:MS and tpot:MS"},
      {{}, "--goodput needs both"},
      {{"ttft:500", "tpot:50", "e2el:2000"}, "--goodput e2el: not supported"},
      {{"ttft=500", "tpot:50"}, "--goodput 'ttft=500': expected KEY:MS"},
      {{"ttft:fast", "tpot:50"}, "--goodput 'ttft:fast': expected KEY:MS"},
      {{"itl:5", "tpot:50"}, "--goodput 'itl:5': unknown objective 'itl' (expected ttft or tpot)"},
      {{"ttft:1", "ttft:2"}, "--goodput: ttft given twice"},
      {{"ttft:0", "tpot:50"}, "--goodput 'ttft:0': milliseconds must be > 0"},
      {{"ttft:-3", "tpot:50"}, "--goodput 'ttft:-3': milliseconds must be > 0"},
      {{"ttft:inf", "tpot:50"}, "--goodput 'ttft:inf': milliseconds must be > 0"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParseGoodput(c.items),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.message;
  }
}

TEST(VllmFlagsTest, BackendAndEndpointMakeTheUrl) {
  struct Case {
    std::string url, backend, endpoint, want;
  };
  const std::vector<Case> cases = {
      // vLLM's default host and port.
      {"", "openai-chat", "", "http://127.0.0.1:8000/v1/chat/completions"},
      {"", "openai", "", "http://127.0.0.1:8000"},
      {"", "vllm", "/v1/completions", "http://127.0.0.1:8000/v1/completions"},
      {"", "", "/v1/chat/completions", "http://127.0.0.1:8000/v1/chat/completions"},
      // --base-url plus --endpoint, as vLLM joins them; a URL's own /v1 is not doubled.
      {"http://h:9000", "openai-chat", "/v1/chat/completions", "http://h:9000/v1/chat/completions"},
      {"http://h:9000/v1/", "", "/v1/chat/completions", "http://h:9000/v1/chat/completions"},
      {"http://h:9000/v1/completions", "", "/v1/chat/completions", "http://h:9000/v1/chat/completions"},
      {"http://h:9000/v1", "openai-chat", "", "http://h:9000/v1/chat/completions"},
      {"http://h:9000/v1/chat/completions", "openai-chat", "", "http://h:9000/v1/chat/completions"},
      {"http://h:9000/proxy", "openai", "/v1/completions", "http://h:9000/proxy/v1/completions"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(OpenAiUrlOf(c.url, c.backend, c.endpoint), IsOkAndHolds(c.want))
        << c.url << " " << c.backend << " " << c.endpoint;
  }
  EXPECT_THAT(OpenAiUrlOf("", "tgi", ""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--backend 'tgi': expected openai, vllm (both /v1/completions) or "
                                 "openai-chat")));
  EXPECT_THAT(OpenAiUrlOf("", "openai-chat", "/v1/completions"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must end in /chat/completions")));
  EXPECT_THAT(OpenAiUrlOf("http://h/v1/completions", "openai-chat", ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must end in /chat/completions")));
  EXPECT_THAT(OpenAiUrlOf("", "openai", "/v1/chat/completions"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("use --backend openai-chat")));
  EXPECT_THAT(OpenAiUrlOf("", "", "/generate"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--endpoint '/generate'")));
}

}  // namespace
}  // namespace baton::bench
