// Server-sent events parsing (any split of the byte stream), the completion request body, the
// meaning of each streamed chunk, and the endpoint URL forms.
#include "benchmarks/bench/openai_protocol.h"

#include <string>
#include <vector>

#include "benchmarks/bench/client_openai.h"
#include "benchmarks/bench/sse_parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/status_matchers.h"

namespace baton::bench {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const char kStream[] =
    ": a comment\r\n"
    "data: {\"a\":1}\r\n\r\n"
    "event: completion\n"
    "data: first line\n"
    "data:second line\n"
    "\n"
    "id: 7\n\n"  // no data: no event
    "data: [DONE]\r\r";

TEST(SseParserTest, WholeStream) {
  SseParser parser;
  EXPECT_THAT(parser.Feed(kStream), ElementsAre("{\"a\":1}", "first line\nsecond line", "[DONE]"));
}

TEST(SseParserTest, EverySplitGivesTheSameEvents) {
  const std::string stream = kStream;
  for (size_t split = 0; split <= stream.size(); ++split) {
    SseParser parser;
    std::vector<std::string> events = parser.Feed(stream.substr(0, split));
    for (std::string& event : parser.Feed(stream.substr(split))) events.push_back(std::move(event));
    EXPECT_THAT(events, ElementsAre("{\"a\":1}", "first line\nsecond line", "[DONE]"))
        << "split at " << split;
  }
  SseParser bytewise;
  std::vector<std::string> events;
  for (char c : stream) {
    for (std::string& event : bytewise.Feed(std::string(1, c))) events.push_back(std::move(event));
  }
  EXPECT_EQ(events.size(), 3u);
}

TEST(OpenAiProtocolTest, RequestBodyForcesTheOutputLength) {
  GenerationRequest request{.prompt_ids = {1, 2, 3}, .max_tokens = 17};
  nlohmann::json body = nlohmann::json::parse(CompletionRequestBody(request, "llama"));
  EXPECT_EQ(body["model"], "llama");
  EXPECT_EQ(body["prompt"], nlohmann::json({1, 2, 3}));
  EXPECT_EQ(body["max_tokens"], 17);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["temperature"], 0.0);
  request.prompt_text = "Hello";
  body = nlohmann::json::parse(CompletionRequestBody(request, ""));
  EXPECT_EQ(body["prompt"], "Hello");
  EXPECT_FALSE(body.contains("model"));
}

TEST(OpenAiProtocolTest, Chunks) {
  absl::StatusOr<CompletionChunk> token = ParseCompletionChunk(
      R"({"id":"c","object":"text_completion","choices":[{"index":0,"text":" the","finish_reason":null}]})");
  ASSERT_THAT(token, IsOk());
  EXPECT_EQ(token->num_choices, 1);
  EXPECT_EQ(token->text, " the");
  EXPECT_EQ(token->finish_reason, "");
  absl::StatusOr<CompletionChunk> last =
      ParseCompletionChunk(R"({"choices":[{"text":"!","finish_reason":"length"}],"usage":null})");
  EXPECT_EQ(last->finish_reason, "length");
  absl::StatusOr<CompletionChunk> usage = ParseCompletionChunk(
      R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}})");
  EXPECT_EQ(usage->num_choices, 0);
  EXPECT_EQ(usage->prompt_tokens, 12);
  EXPECT_EQ(usage->completion_tokens, 5);
  EXPECT_TRUE(ParseCompletionChunk("[DONE]")->done);
  EXPECT_THAT(ParseCompletionChunk("{not json"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseCompletionChunk(R"({"error":{"message":"prompt too long","code":400}})"),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("prompt too long")));
}

TEST(OpenAiProtocolTest, ChatRequestBodyIsOneUserMessage) {
  GenerationRequest request{.prompt_ids = {1, 2, 3}, .prompt_text = "Tell me", .max_tokens = 9};
  nlohmann::json body = nlohmann::json::parse(ChatCompletionRequestBody(request, "tiny"));
  EXPECT_EQ(body["model"], "tiny");
  EXPECT_EQ(body["messages"], nlohmann::json::parse(R"([{"role":"user","content":"Tell me"}])"));
  EXPECT_FALSE(body.contains("prompt"));
  EXPECT_EQ(body["max_completion_tokens"], 9);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["temperature"], 0.0);
  EXPECT_FALSE(nlohmann::json::parse(ChatCompletionRequestBody(request, "")).contains("model"));
}

// A chat.completion.chunk is output when its delta has content: not the role-only first chunk (vLLM
// sends one), nor a finish-only last one.
TEST(OpenAiProtocolTest, ChatChunks) {
  absl::StatusOr<CompletionChunk> role = ParseCompletionChunk(
      R"({"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]})");
  ASSERT_THAT(role, IsOk());
  EXPECT_EQ(role->num_choices, 1);
  EXPECT_FALSE(role->has_output);
  absl::StatusOr<CompletionChunk> token = ParseCompletionChunk(
      R"({"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" the"},"finish_reason":null}]})");
  EXPECT_TRUE(token->has_output);
  EXPECT_EQ(token->text, " the");
  absl::StatusOr<CompletionChunk> last = ParseCompletionChunk(
      R"({"choices":[{"index":0,"delta":{"content":"!"},"finish_reason":"length"}]})");
  EXPECT_TRUE(last->has_output);
  EXPECT_EQ(last->finish_reason, "length");
  absl::StatusOr<CompletionChunk> finish_only =
      ParseCompletionChunk(R"({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})");
  EXPECT_FALSE(finish_only->has_output);
  EXPECT_EQ(finish_only->finish_reason, "stop");
  EXPECT_TRUE(ParseCompletionChunk(R"({"choices":[{"text":""}]})")->has_output)
      << "a completion chunk is a token event even when its text is empty (a partial character)";
  // llama-server's last completion chunk: no text, the finish reason alone. Not a token: counting it
  // understated llama-server's TPOT by 1/N.
  absl::StatusOr<CompletionChunk> llama_server_last = ParseCompletionChunk(
      R"({"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],"object":"text_completion"})");
  ASSERT_THAT(llama_server_last, IsOk());
  EXPECT_FALSE(llama_server_last->has_output);
  EXPECT_EQ(llama_server_last->finish_reason, "length");
  EXPECT_TRUE(ParseCompletionChunk(R"({"choices":[{"text":"!","finish_reason":"stop"}]})")->has_output)
      << "the last token's text with the finish reason is still that token's event";
}

TEST(OpenAiProtocolTest, ModelList) {
  absl::StatusOr<ModelInfo> info =
      ParseModelList(R"({"object":"list","data":[{"id":"tiny","max_model_len":2048}]})");
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->model, "tiny");
  EXPECT_EQ(info->max_model_len, 2048);
  EXPECT_EQ(ParseModelList(R"({"data":[{"id":"gpt"}]})")->max_model_len, 0);
  EXPECT_THAT(ParseModelList("[]"), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(OpenAiProtocolTest, UrlForms) {
  for (const char* url : {"http://127.0.0.1:8000", "http://127.0.0.1:8000/",
                          "http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1/completions"}) {
    absl::StatusOr<OpenAiEndpoint> endpoint = ParseOpenAiUrl(url);
    ASSERT_THAT(endpoint, IsOk()) << url;
    EXPECT_EQ(endpoint->scheme_host_port, "http://127.0.0.1:8000") << url;
    EXPECT_EQ(endpoint->completions_path, "/v1/completions") << url;
    EXPECT_EQ(endpoint->models_path, "/v1/models") << url;
  }
  EXPECT_EQ(ParseOpenAiUrl("https://h/proxy/v1")->completions_path, "/proxy/v1/completions");
  EXPECT_FALSE(ParseOpenAiUrl("http://h:8000/v1")->chat);
  for (const char* url : {"http://h:8000/v1/chat/completions", "http://h:8000/v1/chat/completions/"}) {
    absl::StatusOr<OpenAiEndpoint> chat = ParseOpenAiUrl(url);
    ASSERT_THAT(chat, IsOk()) << url;
    EXPECT_TRUE(chat->chat) << url;
    EXPECT_EQ(chat->completions_path, "/v1/chat/completions") << url;
    EXPECT_EQ(chat->models_path, "/v1/models") << url;
  }
  EXPECT_THAT(ParseOpenAiUrl("127.0.0.1:8000"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseOpenAiUrl("http:///v1"), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace baton::bench
