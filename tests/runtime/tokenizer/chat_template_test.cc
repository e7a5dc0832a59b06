#include "runtime/tokenizer/chat_template.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/status_matchers.h"

namespace baton::runtime {
namespace {

using absl_testing::StatusIs;
using testing::HasSubstr;
using Json = nlohmann::ordered_json;

constexpr char kConfig[] = R"({
  "bos_token": {"content": "<s>", "lstrip": false},
  "eos_token": "</s>",
  "chat_template": [
    {"name": "default", "template": "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}{{ tools is none }}"},
    {"name": "tool_use", "template": "TOOLS {{ tools | map(attribute='name') | join(',') }} {{ eos_token }}"}
  ]
})";

TEST(ChatTemplateTest, NamedTemplatesAndSpecialTokens) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromTokenizerConfigJson(kConfig);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->has_tool_use_template());
  ChatRenderOptions options;
  options.add_generation_prompt = true;
  Json messages = Json::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(*t->Render(messages, options), "<s>[user]hi[assistant]True");
  options.tools = Json::parse(R"([{"name": "a"}, {"name": "b"}])");
  EXPECT_EQ(*t->Render(messages, options), "TOOLS a,b </s>");
}

TEST(ChatTemplateTest, StringTemplateKwargsAndPartsPassThrough) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromTokenizerConfigJson(R"({
    "chat_template": "{% for m in messages %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endfor %}{{ enable_thinking }}{{ bos_token is defined }}"
  })");
  ASSERT_TRUE(t.ok()) << t.status();
  ChatRenderOptions options;
  options.template_kwargs = Json::parse(R"({"enable_thinking": false})");
  Json messages = Json::parse(
      R"([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}])");
  EXPECT_EQ(*t->Render(messages, options), "abFalseFalse");
}

TEST(ChatTemplateTest, FromSourceForAChatTemplateFile) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource("{{ bos_token }}{{ messages[0].content }}",
                                                            "<|begin|>", std::nullopt);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t->Render(Json::parse(R"([{"role": "user", "content": "x"}])"), {}), "<|begin|>x");
}

TEST(ChatTemplateTest, Errors) {
  EXPECT_THAT(ChatTemplate::FromTokenizerConfigJson(R"({"bos_token": "<s>"})").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no chat_template")));
  EXPECT_THAT(ChatTemplate::FromTokenizerConfigJson(
                  R"({"chat_template": [{"name": "tool_use", "template": "x"}]})").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'default'")));
  EXPECT_THAT(ChatTemplate::FromTokenizerConfigJson(R"({"chat_template": "a\n{% include 'x' %}"})")
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("chat template line 2: unsupported tag 'include'")));
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(
      "{% if messages[0].role != 'user' %}{{ raise_exception('first message must be a user turn') }}"
      "{% endif %}",
      std::nullopt, std::nullopt);
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(t->Render(Json::parse(R"([{"role": "assistant", "content": ""}])"), {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "first message must be a user turn"));
  EXPECT_THAT(t->Render(Json::parse("{}"), {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("array")));
}

}  // namespace
}  // namespace baton::runtime
