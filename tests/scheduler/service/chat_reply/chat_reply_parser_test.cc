// ChatReplyParser: a reply streamed in pieces of any size comes to the same message as the reply
// read at once, each call's id and name go out before its arguments, and held-back text (a
// marker's first characters) is released when the reply ends.
#include "scheduler/service/chat_reply/chat_reply_parser.h"

#include <random>
#include <set>

#include "gtest/gtest.h"

namespace baton::scheduler {
namespace {

struct Message {
  std::string reasoning;
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  std::set<std::string> ids;
};

// Feeds `text` in pieces cut at `cuts` (sorted offsets), then Finish; checks the delta order rules.
Message Stream(ChatReplyParser parser, std::string_view text, const std::vector<size_t>& cuts) {
  Message m;
  auto take = [&m](ChatReplyDelta delta) {
    m.reasoning += delta.reasoning;
    m.content += delta.content;
    for (const ToolCallDelta& call : delta.tool_calls) {
      if (call.first) {
        EXPECT_EQ(call.index, static_cast<int>(m.calls.size()));
        EXPECT_TRUE(m.ids.insert(call.id).second) << "repeated id " << call.id;
        m.calls.emplace_back(call.name, call.arguments);
      } else {
        ASSERT_LT(call.index, static_cast<int>(m.calls.size())) << "arguments before the name";
        m.calls[call.index].second += call.arguments;
      }
    }
  };
  size_t at = 0;
  for (size_t cut : cuts) {
    take(parser.Feed(text.substr(at, cut - at)));
    at = cut;
  }
  take(parser.Feed(text.substr(at)));
  take(parser.Finish());
  return m;
}

ChatReplyParser Parser(const char* tools, const char* reasoning = nullptr) {
  return ChatReplyParser(reasoning ? std::optional(*FindReasoningFormat(reasoning)) : std::nullopt,
                         tools ? std::optional(*FindToolCallFormat(tools)) : std::nullopt);
}

void ExpectSame(const Message& a, const Message& b) {
  EXPECT_EQ(a.reasoning, b.reasoning);
  EXPECT_EQ(a.content, b.content);
  EXPECT_EQ(a.calls, b.calls);
}

TEST(ChatReplyParserTest, AnyStreamingComesToTheWholeReply) {
  const std::vector<std::pair<const char*, std::string>> replies = {
      {"hermes", "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": "
                 "[1, 2]}}\n</tool_call>\n<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call> done <tool"},
      {"hermes", "<tool_call>oops</tool_call> and text with < and <tool"},
      {"llama3_json", "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"s\": \"x;y}\"}}; {\"name\": \"b\", "
                      "\"parameters\": {\"n\": -1.5e3}}"},
      {"llama3_json", "  The answer is 42."},
      {"mistral", "Sure [TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"k\": \"\\\"v\\\"\"}}]"},
      {"mistral", "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}[TOOL_CALLS]now{}"},
  };
  std::mt19937 rng(7);
  for (const auto& [format, text] : replies) {
    SCOPED_TRACE(text);
    const Message whole = Stream(Parser(format), text, {});
    std::vector<size_t> every;
    for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
    ExpectSame(Stream(Parser(format), text, every), whole);
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<size_t> cuts;
      for (size_t i = 1; i < text.size(); ++i) {
        if (rng() % 4 == 0) cuts.push_back(i);
      }
      ExpectSame(Stream(Parser(format), text, cuts), whole);
    }
  }
}

TEST(ChatReplyParserTest, TheNameGoesOutBeforeAnyArgument) {
  ChatReplyParser parser = Parser("hermes");
  EXPECT_TRUE(parser.Feed("<tool_call>{\"name\": \"get_weather\", \"argu").tool_calls.empty() == false);
  ChatReplyDelta delta = parser.Feed("ments\": {\"city\": ");
  ASSERT_EQ(delta.tool_calls.size(), 1u);
  EXPECT_FALSE(delta.tool_calls[0].first);
  EXPECT_EQ(delta.tool_calls[0].arguments, "{\"city\": ");
  delta = parser.Feed("\"Rome\"}}</tool_call>");
  EXPECT_EQ(delta.tool_calls[0].arguments, "\"Rome\"}");
  EXPECT_EQ(parser.num_calls(), 1);
}

TEST(ChatReplyParserTest, FirstDeltaCarriesIdAndNameWithoutArguments) {
  ChatReplyParser parser = Parser("hermes");
  const ChatReplyDelta delta = parser.Feed("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1");
  ASSERT_EQ(delta.tool_calls.size(), 1u);
  EXPECT_TRUE(delta.tool_calls[0].first);
  EXPECT_EQ(delta.tool_calls[0].name, "f");
  EXPECT_EQ(delta.tool_calls[0].arguments, "");
  EXPECT_TRUE(delta.tool_calls[0].id.starts_with("call_"));
  EXPECT_EQ(delta.tool_calls[0].id.size(), 29u);
}

TEST(ChatReplyParserTest, MistralIdsAreNineCharacters) {
  const Message m = Stream(Parser("mistral"), "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}]", {});
  ASSERT_EQ(m.ids.size(), 1u);
  EXPECT_EQ(m.ids.begin()->size(), 9u);
}

TEST(ChatReplyParserTest, ReasoningThenCalls) {
  const std::string text =
      "<think>The user wants weather; call the tool.</think>\n<tool_call>{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Oslo\"}}</tool_call>";
  const Message whole = Stream(Parser("hermes", "qwen3"), text, {});
  EXPECT_EQ(whole.reasoning, "The user wants weather; call the tool.");
  EXPECT_EQ(whole.content, "\n");
  ASSERT_EQ(whole.calls.size(), 1u);
  EXPECT_EQ(whole.calls[0].second, "{\"city\": \"Oslo\"}");
  std::vector<size_t> every;
  for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
  ExpectSame(Stream(Parser("hermes", "qwen3"), text, every), whole);
}

TEST(ChatReplyParserTest, HeldBackTextIsReleasedAtTheEnd) {
  ChatReplyParser parser = Parser("hermes");
  EXPECT_EQ(parser.Feed("a <tool_ca").content, "a ");
  EXPECT_EQ(parser.Finish().content, "<tool_ca");
}

TEST(ChatReplyParserTest, WithoutFormatsEverythingIsContent) {
  ChatReplyParser parser(std::nullopt, std::nullopt);
  EXPECT_EQ(parser.Feed("<tool_call>{").content, "<tool_call>{");
}

}  // namespace
}  // namespace baton::scheduler
