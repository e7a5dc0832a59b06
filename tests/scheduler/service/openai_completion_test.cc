// OpenAI /v1/completions JSON -> native request: OpenAI's defaults, the prompt forms, and the errors
// the JSON alone can cause (test_serving.py checks the same end to end, through a server).
#include "scheduler/service/openai_completion.h"

#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace baton::scheduler {
namespace {

using absl_testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using nlohmann::json;

// The request of a body with one prompt.
absl::StatusOr<GenerateRequest> CompletionToRequest(const json& body, AnswerShape* shape) {
  absl::StatusOr<std::vector<GenerateRequest>> requests = CompletionToRequests(body, shape);
  if (!requests.ok()) return requests.status();
  EXPECT_EQ(requests->size(), 1u);
  return requests->front();
}

TEST(OpenAiCompletionTest, DefaultsAndFields) {
  AnswerShape stream{.stream = true};
  absl::StatusOr<GenerateRequest> request =
      CompletionToRequest(json::parse(R"({"model": "tiny", "prompt": "hi"})"), &stream);
  ASSERT_THAT(request, absl_testing::IsOk());
  EXPECT_FALSE(stream.stream);
  EXPECT_FALSE(stream.include_usage);
  EXPECT_EQ(request->model, "tiny");
  EXPECT_EQ(request->prompt_text, "hi");
  EXPECT_FALSE(request->prompt_ids.has_value());
  EXPECT_TRUE(request->max_tokens_given);
  EXPECT_EQ(request->params.max_tokens, 16);
  EXPECT_EQ(request->params.sampling.temperature, 1.0f);
  EXPECT_FALSE(request->temperature_given);  // Prepare takes the model's default
  EXPECT_FALSE(request->top_p_given);
  EXPECT_EQ(request->params.sampling.top_p, 1.0f);
  EXPECT_FALSE(request->seed_given);

  request = CompletionToRequest(json::parse(R"({
      "prompt": [1, 2, 3], "max_tokens": 4, "temperature": 0, "top_p": 0, "top_k": -1,
      "logprobs": 2, "seed": 9, "stop": ["a", "b"], "ignore_eos": true, "stream": true,
      "stream_options": {"include_usage": true}})"),
                                &stream);
  ASSERT_THAT(request, absl_testing::IsOk());
  EXPECT_TRUE(stream.stream);
  EXPECT_TRUE(stream.include_usage);
  EXPECT_THAT(*request->prompt_ids, ElementsAre(1, 2, 3));
  EXPECT_EQ(request->params.max_tokens, 4);
  EXPECT_EQ(request->params.sampling.temperature, 0.0f);
  EXPECT_EQ(request->params.sampling.top_p, 1.0f);  // 0: unset, as in the gRPC API
  EXPECT_EQ(request->params.sampling.top_k, 0);     // vLLM's -1: off
  EXPECT_EQ(request->params.num_logprobs, 2);
  EXPECT_TRUE(request->seed_given);
  EXPECT_EQ(request->params.seed, 9u);
  EXPECT_THAT(request->stop_strings, ElementsAre("a", "b"));
  EXPECT_TRUE(request->params.ignore_eos);

  request = CompletionToRequest(json::parse(R"({"prompt": ["one"], "stop": "x"})"), &stream);
  ASSERT_THAT(request, absl_testing::IsOk());
  EXPECT_EQ(request->prompt_text, "one");
  EXPECT_THAT(request->stop_strings, ElementsAre("x"));
}

TEST(OpenAiCompletionTest, Errors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"([1])", "the body must be a JSON object"},
      {R"({})", "'prompt' is required"},
      {R"({"prompt": 5})", "'prompt' must be a string, an array of token ids"},
      {R"({"prompt": []})", "'prompt' must be a string, an array of token ids, or a non-empty list"},
      {R"({"prompt": ["a", 5]})", "'prompt': a list must hold strings or token id arrays"},
      {R"({"prompt": [1, "a"]})", "'prompt': mixed token id array"},
      {R"({"prompt": "x", "n": 0})", "'n' must be in [1, 128], got 0"},
      {R"({"prompt": "x", "n": 3, "best_of": 2})", "'best_of' must be >= 'n' (3), got 2"},
      {R"({"prompt": "x", "best_of": 2, "stream": true})", "'best_of' greater than 'n' cannot be streamed"},
      {R"({"prompt": ["a", "b", "c"], "n": 50})", "prompts x best_of (or n) must be at most 128, got 3 x 50"},
      {R"({"prompt": "x", "max_tokens": 1.5})", "'max_tokens' must be an integer"},
      {R"({"prompt": "x", "temperature": "hot"})", "'temperature' must be a number"},
      {R"({"prompt": "x", "seed": 1.5})", "'seed' must be an integer"},
      {R"({"prompt": "x", "stop": 3})", "'stop' must be a string or an array of strings"},
      {R"({"prompt": "x", "stop": [3]})", "'stop' must hold strings"},
      {R"({"prompt": "x", "stream": "yes"})", "'stream' must be true or false"},
      {R"({"prompt": "x", "echo": 1})", "'echo' must be true or false"},
      {R"({"prompt": "x", "ignore_eos": "no"})", "'ignore_eos' must be true or false"},
      {R"({"prompt": "x", "stream_options": 1})", "'stream_options' must be an object"},
      {R"({"prompt": "x", "stream_options": {"include_usage": true}})", "'stream_options' needs 'stream': true"},
      {R"({"prompt": "x", "stream": true, "stream_options": {"continuous_usage_stats": true}})",
       "'stream_options.continuous_usage_stats' is not supported yet"},
      {R"({"prompt": "x", "detokenize": false})", "'detokenize' is not supported yet"},
      {R"({"prompt": "x", "request_id": 7})", "'request_id' must be a string"},
      {R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": "y"}})",
       "'include_usage' must be true or false"},
      // Out of range: refused, never wrapped or truncated (2^32 + 4 once became 4).
      {R"({"prompt": "x", "max_tokens": 4294967300})", "'max_tokens' is out of range: 4294967300"},
      {R"({"prompt": "x", "max_tokens": -9223372036854775808})", "'max_tokens' is out of range"},
      {R"({"prompt": "x", "top_k": 18446744073709551615})", "'top_k' is out of range"},
      {R"({"prompt": "x", "logprobs": 2147483648})", "'logprobs' is out of range"},
      {R"({"prompt": "x", "seed": -1})", "'seed' is out of range: -1"},
      {R"({"prompt": "x", "temperature": 1e300})", "'temperature' is out of range"},
      {R"({"prompt": [1, 4294967297]})", "'prompt': token id 4294967297 is out of range"},
      {R"({"prompt": [-2147483649]})", "'prompt': token id -2147483649 is out of range"},
      // vLLM fields this server does not honour: refused by name unless neutral.
      {R"({"prompt": "x", "use_beam_search": true})", "'use_beam_search' is not supported yet"},
      // Structured outputs: shapes the reader refuses (whether a constraint compiles is the driver's).
      {R"({"prompt": "x", "guided_json": 3})", "'guided_json' must be a JSON schema object"},
      {R"({"prompt": "x", "guided_json": "{not json"})", "'guided_json': not a JSON schema"},
      {R"({"prompt": "x", "guided_choice": []})", "'guided_choice' must be a non-empty list of strings"},
      {R"({"prompt": "x", "guided_choice": ["a", 1]})", "'guided_choice' must be a non-empty list of strings"},
      {R"({"prompt": "x", "guided_regex": "a", "guided_choice": ["a"]})", "'guided_regex' and 'guided_choice' both constrain"},
      {R"({"prompt": "x", "response_format": {"type": "json_object"}, "structured_outputs": {"regex": "a"}})",
       "'response_format' and 'structured_outputs.regex' both constrain"},
      {R"({"prompt": "x", "response_format": {"type": "yaml"}})", "'response_format': unknown type 'yaml'"},
      {R"({"prompt": "x", "response_format": "json"})", "'response_format' must be an object"},
      {R"({"prompt": "x", "response_format": {"type": "json_schema"}})", "needs a 'json_schema' object"},
      {R"({"prompt": "x", "response_format": {"type": "structural_tag"}})", "structural_tag is not supported"},
      {R"({"prompt": "x", "structured_outputs": {"structural_tag": "{}"}})", "'structural_tag' is not supported"},
      {R"({"prompt": "x", "structured_outputs": {"json_object": 1}})", "must be true or false"},
      {R"({"prompt": "x", "spaces_between_special_tokens": false})", "'spaces_between_special_tokens' is not supported yet"},
      {R"({"prompt": "x", "allowed_token_ids": [1, 2]})", "'allowed_token_ids' is not supported yet"},
      {R"({"prompt": "x", "add_special_tokens": false})", "'add_special_tokens' is not supported yet"},
      {R"({"prompt": "x", "prompt_logprobs": 21})", "'prompt_logprobs' must be in [0, 20], got 21"},
      {R"({"prompt": "x", "prompt_logprobs": 1, "stream": true})", "'prompt_logprobs' are not available when streaming"},
  };
  for (const auto& [body, message] : cases) {
    SCOPED_TRACE(body);
    AnswerShape stream;
    EXPECT_THAT(CompletionToRequest(json::parse(body), &stream),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(message)));
  }
}

// Every spelling of a constraint reads into the same OutputConstraint.
TEST(OpenAiCompletionTest, StructuredOutputsInEverySpelling) {
  using Kind = runtime::OutputConstraint::Kind;
  const std::string schema = R"({"properties":{"a":{"type":"integer"}},"type":"object"})";
  const struct {
    std::string fields;
    runtime::OutputConstraint want;
  } cases[] = {
      {R"("response_format": {"type": "text"})", {}},
      {R"("response_format": {"type": "json_object"})", {.kind = Kind::kJsonObject}},
      {R"("response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": )" + schema + "}}",
       {.kind = Kind::kJsonSchema, .text = schema}},
      {R"("response_format": {"type": "json_schema", "json_schema": {"name": "n", "strict": false, "schema": )" +
           schema + "}}",
       {.kind = Kind::kJsonSchema, .text = schema, .strict = false}},
      {R"("structured_outputs": {"json": )" + schema + "}", {.kind = Kind::kJsonSchema, .text = schema}},
      {R"("guided_json": ")" + absl::StrReplaceAll(schema, {{"\"", "\\\""}}) + "\"",
       {.kind = Kind::kJsonSchema, .text = schema}},
      {R"("structured_outputs": {"regex": "[0-9]+", "backend": "xgrammar"})", {.kind = Kind::kRegex, .text = "[0-9]+"}},
      {R"("guided_regex": "[0-9]+")", {.kind = Kind::kRegex, .text = "[0-9]+"}},
      {R"("structured_outputs": {"choice": ["a", "b"]})", {.kind = Kind::kChoice, .choices = {"a", "b"}}},
      {R"("guided_choice": ["a", "b"])", {.kind = Kind::kChoice, .choices = {"a", "b"}}},
      {R"("structured_outputs": {"grammar": "root ::= \"a\""})", {.kind = Kind::kGrammar, .text = "root ::= \"a\""}},
      {R"("guided_grammar": "root ::= \"a\"")", {.kind = Kind::kGrammar, .text = "root ::= \"a\""}},
      {R"("structured_outputs": {"json_object": true})", {.kind = Kind::kJsonObject}},
  };
  for (const auto& [fields, want] : cases) {
    SCOPED_TRACE(fields);
    AnswerShape shape;
    absl::StatusOr<GenerateRequest> request =
        CompletionToRequest(json::parse(R"({"prompt": "x", )" + fields + "}"), &shape);
    ASSERT_THAT(request, absl_testing::IsOk());
    EXPECT_TRUE(request->params.constraint == want) << runtime::OutputConstraintKindName(request->params.constraint.kind)
                                                    << " " << request->params.constraint.text;
  }
}

TEST(OpenAiCompletionTest, PromptListsAndChoices) {
  AnswerShape shape;
  absl::StatusOr<std::vector<GenerateRequest>> requests = CompletionToRequests(
      json::parse(R"({"prompt": ["one", [5, 6]], "n": 2, "best_of": 3, "echo": true, "max_tokens": 4,
                      "seed": 7})"),
      &shape);
  ASSERT_THAT(requests, absl_testing::IsOk());
  ASSERT_EQ(requests->size(), 2u);
  EXPECT_EQ((*requests)[0].prompt_text, "one");
  EXPECT_THAT(*(*requests)[1].prompt_ids, ElementsAre(5, 6));
  for (const GenerateRequest& request : *requests) {
    EXPECT_EQ(request.params.max_tokens, 4);
    EXPECT_EQ(request.params.seed, 7u);
  }
  EXPECT_EQ(shape.n, 2);
  EXPECT_EQ(shape.best_of, 3);
  EXPECT_TRUE(shape.echo);

  requests = CompletionToRequests(json::parse(R"({"prompt": [[1], [2], [3]], "n": 2})"), &shape);
  ASSERT_THAT(requests, absl_testing::IsOk());
  EXPECT_EQ(requests->size(), 3u);
  EXPECT_EQ(shape.best_of, 2);  // absent: n
}

TEST(OpenAiCompletionTest, EchoWithLogprobsScoresThePromptAndMaxTokensZeroEchoesAlone) {
  AnswerShape shape;
  absl::StatusOr<GenerateRequest> request = CompletionToRequest(
      json::parse(R"({"prompt": "x", "echo": true, "logprobs": 2, "max_tokens": 3})"), &shape);
  ASSERT_THAT(request, absl_testing::IsOk());
  EXPECT_EQ(request->params.num_prompt_logprobs, 2);
  EXPECT_FALSE(shape.echo_only);

  // lm-evaluation-harness's loglikelihood request: the prompt's scores, nothing generated.
  shape = {};
  request = CompletionToRequest(
      json::parse(R"({"prompt": "x", "echo": true, "logprobs": 0, "max_tokens": 0})"), &shape);
  ASSERT_THAT(request, absl_testing::IsOk());
  EXPECT_TRUE(shape.echo_only);
  EXPECT_EQ(request->params.num_prompt_logprobs, 0);
  EXPECT_EQ(request->params.max_tokens, 1);  // one token runs the prefill; the answer drops it

  // Their neutral values pass; vLLM's prompt_logprobs field is honoured.
  shape = {};
  request = CompletionToRequest(
      json::parse(R"({"prompt": "x", "use_beam_search": false, "response_format": {"type": "text"},
                      "length_penalty": 1, "skip_special_tokens": true, "prompt_logprobs": 4})"),
      &shape);
  ASSERT_THAT(request, absl_testing::IsOk());
  EXPECT_TRUE(shape.prompt_logprobs);
  EXPECT_EQ(request->params.num_prompt_logprobs, 4);

  shape = {};
  request = CompletionToRequest(json::parse(R"({"prompt": "x", "logprobs": 1})"), &shape);
  ASSERT_THAT(request, absl_testing::IsOk());
  EXPECT_FALSE(request->params.num_prompt_logprobs.has_value());  // no echo, no prompt scores
}

TEST(OpenAiCompletionTest, IntegersAtTheEdgesOfTheirRange) {
  AnswerShape stream;
  absl::StatusOr<GenerateRequest> request = CompletionToRequest(
      json::parse(R"({"prompt": [2147483647], "max_tokens": 2147483647, "seed": 18446744073709551615})"),
      &stream);
  ASSERT_THAT(request, absl_testing::IsOk());
  EXPECT_THAT(*request->prompt_ids, ElementsAre(2147483647));
  EXPECT_EQ(request->params.max_tokens, 2147483647);
  EXPECT_EQ(request->params.seed, 18446744073709551615ull);
}

TEST(OpenAiCompletionTest, StatusAndFinishReason) {
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kInternal), 500);
  EXPECT_STREQ(FinishReasonName(runtime::FinishReason::kLength), "length");
  EXPECT_STREQ(FinishReasonName(runtime::FinishReason::kStop), "stop");
  EXPECT_EQ(FinishReasonName(runtime::FinishReason::kNone), nullptr);
}

}  // namespace
}  // namespace baton::scheduler
