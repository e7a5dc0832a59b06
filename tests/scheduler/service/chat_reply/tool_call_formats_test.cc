// The tool-call and reasoning formats, read whole: what vLLM's parsers of the same names make of
// the replies the models write, and what is content when a reply only looks like a call.
#include "scheduler/service/chat_reply/tool_call_formats.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "scheduler/service/chat_reply/json_scan.h"
#include "scheduler/service/chat_reply/reasoning_formats.h"

namespace baton::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::FieldsAre;

ParsedReply Read(std::string_view format, std::string_view text) {
  absl::StatusOr<ToolCallFormat> found = FindToolCallFormat(format);
  EXPECT_TRUE(found.ok()) << found.status();
  return found->parse(text, /*finished=*/true);
}

nlohmann::json Json(const std::string& text) { return nlohmann::json::parse(text); }

TEST(JsonScanTest, FindsWhereValuesEnd) {
  EXPECT_EQ(ScanJsonValue(R"({"a": "}", "b": [1, {"c": "\"]"}]} tail)", 0).end, 34u);
  EXPECT_EQ(ScanJsonValue(R"({"a": [1, 2)", 0).state, ScanState::kIncomplete);
  EXPECT_EQ(ScanJsonValue(R"({"a": [1, 2}])", 0).state, ScanState::kInvalid);
  EXPECT_EQ(ScanJsonValue("12", 0).state, ScanState::kIncomplete);  // more digits may follow
  EXPECT_EQ(ScanJsonValue("12,", 0).end, 2u);
  EXPECT_EQ(ScanJsonValue("\"a\nb\"", 0).state, ScanState::kInvalid);
  EXPECT_EQ(HeldMarkerPrefix("text <tool_", "<tool_call>"), 6u);
  EXPECT_EQ(HeldMarkerPrefix("text", "<tool_call>"), 0u);
}

TEST(JsonScanTest, ReadsACallObjectAsFarAsItGoes) {
  CallObjectScan scan = ScanCallObject(R"({"name": "get_weather", "arguments": {"city": "Par)", 0, {"arguments"});
  EXPECT_EQ(scan.state, ScanState::kIncomplete);
  EXPECT_EQ(scan.name, "get_weather");
  EXPECT_EQ(scan.arguments, R"({"city": "Par)");
  scan = ScanCallObject(R"({"arguments": {}, "name": "n\u00e9"} rest)", 0, {"arguments"});
  EXPECT_EQ(scan.state, ScanState::kComplete);
  EXPECT_EQ(scan.name, "n\xc3\xa9");
  EXPECT_EQ(scan.end, 36u);
  EXPECT_EQ(ScanCallObject(R"({"name" "x"})", 0, {"arguments"}).state, ScanState::kInvalid);
}

TEST(ToolCallFormatTest, HermesReadsEveryCallAndTheContentAround) {
  const ParsedReply reply = Read("hermes",
                                 "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                 "{\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
                                 "\"arguments\": {\"tz\": \"CET\"}}\n</tool_call>");
  EXPECT_EQ(reply.content, "Let me check.\n\n");
  ASSERT_EQ(reply.calls.size(), 2u);
  EXPECT_EQ(reply.calls[0].name, "get_weather");
  EXPECT_EQ(Json(reply.calls[0].arguments), Json(R"({"city": "Paris"})"));
  EXPECT_EQ(reply.calls[1].name, "get_time");
  EXPECT_EQ(Json(reply.calls[1].arguments), Json(R"({"tz": "CET"})"));
}

TEST(ToolCallFormatTest, HermesTextThatIsNoCallStaysContent) {
  EXPECT_EQ(Read("hermes", "<tool_call>not json</tool_call> after").content, "<tool_call>not json</tool_call> after");
  EXPECT_EQ(Read("hermes", "a <tool_call>{\"arguments\": {}}</tool_call>").content,
            "a <tool_call>{\"arguments\": {}}</tool_call>");
  EXPECT_TRUE(Read("hermes", "a <tool_call>{\"arguments\": {}}</tool_call>").calls.empty());
  EXPECT_EQ(Read("hermes", "plain text").content, "plain text");
}

TEST(ToolCallFormatTest, HermesCallWithoutArgumentsTakesNone) {
  const ParsedReply reply = Read("hermes", "<tool_call>{\"name\": \"now\"}</tool_call>");
  ASSERT_EQ(reply.calls.size(), 1u);
  EXPECT_EQ(reply.calls[0].arguments, "{}");
}

TEST(ToolCallFormatTest, Llama3JsonReadsCallsSeparatedBySemicolons) {
  ParsedReply reply = Read("llama3_json",
                           "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"x\": 1}}; {\"name\": \"b\", "
                           "\"parameters\": {}}");
  EXPECT_EQ(reply.content, "");
  ASSERT_EQ(reply.calls.size(), 2u);
  EXPECT_THAT(reply.calls[0], FieldsAre("a", R"({"x": 1})"));
  EXPECT_THAT(reply.calls[1], FieldsAre("b", "{}"));
  reply = Read("llama3_json", " {\"name\": \"a\", \"arguments\": {\"x\": [1, 2]}}");
  ASSERT_EQ(reply.calls.size(), 1u);
  EXPECT_EQ(reply.calls[0].arguments, R"({"x": [1, 2]})");
}

TEST(ToolCallFormatTest, Llama3JsonReplyThatIsNoCallIsContent) {
  EXPECT_EQ(Read("llama3_json", "The answer is {x}.").content, "The answer is {x}.");
  EXPECT_EQ(Read("llama3_json", "{\"answer\": 42}").content, "{\"answer\": 42}");
  EXPECT_TRUE(Read("llama3_json", "{\"answer\": 42}").calls.empty());
}

TEST(ToolCallFormatTest, MistralReadsTheListAndTheV11Form) {
  ParsedReply reply = Read("mistral",
                           "Sure. [TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {\"q\": \"x\"}}, {\"name\": "
                           "\"b\", \"arguments\": {}}]");
  EXPECT_EQ(reply.content, "Sure. ");
  ASSERT_EQ(reply.calls.size(), 2u);
  EXPECT_THAT(reply.calls[0], FieldsAre("a", R"({"q": "x"})"));
  EXPECT_THAT(reply.calls[1], FieldsAre("b", "{}"));
  reply = Read("mistral", "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}[TOOL_CALLS]now{}");
  ASSERT_EQ(reply.calls.size(), 2u);
  EXPECT_THAT(reply.calls[0], FieldsAre("get_weather", R"({"city": "Oslo"})"));
  EXPECT_THAT(reply.calls[1], FieldsAre("now", "{}"));
  EXPECT_EQ(Read("mistral", "no calls").content, "no calls");
}

TEST(ToolCallFormatTest, RequiredAndNamedReadWhatTheGrammarForces) {
  ParsedReply reply = RequiredCallsFormat().parse(
      R"([{"name": "a", "parameters": {"x": 1}}, {"name": "b", "parameters": {}}])", true);
  ASSERT_EQ(reply.calls.size(), 2u);
  EXPECT_THAT(reply.calls[0], FieldsAre("a", R"({"x": 1})"));
  reply = NamedCallFormat("get_weather").parse(R"({"city": "Rome"})", true);
  EXPECT_THAT(reply.calls, ElementsAre(FieldsAre("get_weather", R"({"city": "Rome"})")));
}

TEST(ToolCallFormatTest, UnknownNamesAreRefusedNamingTheKnownOnes) {
  EXPECT_THAT(FindToolCallFormat("pythonic").status().message(), ::testing::HasSubstr("hermes, llama3_json, mistral"));
  EXPECT_THAT(FindReasoningFormat("o1").status().message(), ::testing::HasSubstr("deepseek_r1, qwen3"));
}

TEST(ReasoningFormatTest, SplitsThinkingFromContent) {
  const ReasoningFormat r1 = *FindReasoningFormat("deepseek_r1");
  ReasoningSplit split = r1.split("<think>hmm</think>The answer.", true);
  EXPECT_EQ(split.reasoning, "hmm");
  EXPECT_EQ(split.content, "The answer.");
  split = r1.split("the prompt opened it</think>Done", true);
  EXPECT_EQ(split.reasoning, "the prompt opened it");
  EXPECT_EQ(split.content, "Done");
  split = r1.split("still thinking </thi", false);
  EXPECT_EQ(split.reasoning, "still thinking ");  // the tag's start is held back
  const ReasoningFormat qwen3 = *FindReasoningFormat("qwen3");
  split = qwen3.split("no thinking today", true);
  EXPECT_EQ(split.reasoning, "");
  EXPECT_EQ(split.content, "no thinking today");
  split = qwen3.split("<think>a</think>b", true);
  EXPECT_EQ(split.reasoning, "a");
  EXPECT_EQ(split.content, "b");
}

}  // namespace
}  // namespace baton::scheduler
