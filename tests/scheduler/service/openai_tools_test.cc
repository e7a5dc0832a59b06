// tools and tool_choice read from a chat body: which constraint a forced choice sets, what an auto
// choice needs from the server, and the 400s.
#include "scheduler/service/openai_tools.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::scheduler {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
   "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "now"}}])");

const ChatReplyOptions kAuto{.enable_auto_tool_choice = true, .tool_call_parser = "hermes"};

absl::StatusOr<ChatReplyPlan> Read(json body, const ChatReplyOptions& options, GenerateRequest* request) {
  return ReadToolChoice(body, options, request);
}

TEST(OpenAiToolsTest, NoneAndAbsentChoicesLeaveTheRequestAlone) {
  GenerateRequest request;
  absl::StatusOr<ChatReplyPlan> plan = Read({{"tools", kTools}}, {}, &request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->tool_calls);
  EXPECT_FALSE(request.params.constraint.active());
  EXPECT_TRUE(request.skip_special_tokens);
  plan = Read({{"tools", kTools}, {"tool_choice", "none"}}, kAuto, &request);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->tool_calls);
}

TEST(OpenAiToolsTest, AutoIsTheDefaultWithToolsWhenTheServerParses) {
  GenerateRequest request;
  absl::StatusOr<ChatReplyPlan> plan = Read({{"tools", kTools}}, kAuto, &request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->tool_calls);
  EXPECT_EQ(plan->tool_calls->name, "hermes");
  EXPECT_TRUE(plan->finish_with_tool_calls);
  EXPECT_FALSE(request.skip_special_tokens);
  EXPECT_FALSE(request.params.constraint.active());
}

TEST(OpenAiToolsTest, RequiredForcesAListOfCallsToTheTools) {
  GenerateRequest request;
  absl::StatusOr<ChatReplyPlan> plan = Read({{"tools", kTools}, {"tool_choice", "required"}}, {}, &request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->tool_calls->name, "required");
  EXPECT_TRUE(plan->finish_with_tool_calls);
  ASSERT_EQ(request.params.constraint.kind, runtime::OutputConstraint::Kind::kJsonSchema);
  EXPECT_FALSE(request.params.constraint.any_whitespace);  // compact, as OpenAI's arguments
  EXPECT_TRUE(request.params.constraint.strict);
  const json schema = json::parse(request.params.constraint.text);
  EXPECT_EQ(schema["type"], "array");
  EXPECT_EQ(schema["minItems"], 1);
  const json& any_of = schema["items"]["anyOf"];
  ASSERT_EQ(any_of.size(), 2u);
  EXPECT_EQ(any_of[0]["properties"]["name"]["enum"], json::array({"get_weather"}));
  EXPECT_EQ(any_of[0]["properties"]["parameters"], kTools[0]["function"]["parameters"]);
  EXPECT_EQ(any_of[1]["properties"]["parameters"], json({{"type", "object"}}));
  EXPECT_FALSE(schema.contains("maxItems"));
  GenerateRequest single;
  ASSERT_TRUE(Read({{"tools", kTools}, {"tool_choice", "required"}, {"parallel_tool_calls", false}}, {}, &single).ok());
  EXPECT_EQ(json::parse(single.params.constraint.text)["maxItems"], 1);
}

TEST(OpenAiToolsTest, ANamedChoiceForcesItsArguments) {
  GenerateRequest request;
  absl::StatusOr<ChatReplyPlan> plan = Read(
      {{"tools", kTools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}}, {},
      &request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->tool_calls->name, "named");
  EXPECT_FALSE(plan->finish_with_tool_calls);  // OpenAI's: "stop"
  EXPECT_EQ(json::parse(request.params.constraint.text), kTools[0]["function"]["parameters"]);
}

TEST(OpenAiToolsTest, BadChoicesAreRefusedNamingTheProblem) {
  GenerateRequest request;
  EXPECT_THAT(Read({{"tools", kTools}, {"tool_choice", "auto"}}, {}, &request).status().message(),
              HasSubstr("--enable-auto-tool-choice"));
  EXPECT_THAT(Read({{"tool_choice", "required"}}, {}, &request).status().message(), HasSubstr("needs 'tools'"));
  EXPECT_THAT(Read({{"tools", kTools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "x"}}}}}}, {},
                   &request).status().message(),
              HasSubstr("'x', which is not in 'tools'"));
  EXPECT_THAT(Read({{"tools", kTools}, {"tool_choice", "sometimes"}}, {}, &request).status().message(),
              HasSubstr("must be \"none\", \"auto\", \"required\""));
  EXPECT_THAT(Read({{"tools", json::array({{{"type", "function"}, {"function", {{"description", "?"}}}}})},
                    {"tool_choice", "required"}}, {}, &request).status().message(),
              HasSubstr("tools[0].function.name"));
  GenerateRequest constrained;
  constrained.params.constraint.kind = runtime::OutputConstraint::Kind::kJsonObject;
  EXPECT_THAT(Read({{"tools", kTools}, {"tool_choice", "required"}}, {}, &constrained).status().message(),
              HasSubstr("cannot be combined with response_format"));
}

TEST(OpenAiToolsTest, ServerOptionsAreChecked) {
  EXPECT_TRUE(ValidateChatReplyOptions(kAuto).ok());
  EXPECT_FALSE(ValidateChatReplyOptions({.enable_auto_tool_choice = true}).ok());
  EXPECT_FALSE(ValidateChatReplyOptions({.tool_call_parser = "xml"}).ok());
  EXPECT_FALSE(ValidateChatReplyOptions({.reasoning_parser = "o1"}).ok());
  EXPECT_TRUE(ValidateChatReplyOptions({.reasoning_parser = "deepseek_r1"}).ok());
}

}  // namespace
}  // namespace baton::scheduler
