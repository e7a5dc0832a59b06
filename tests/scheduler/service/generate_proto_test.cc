// v1 Generate messages <-> native: proto3 defaults map to "not given", and a chunk's fields land
// where the Python client reads them.
#include "scheduler/service/generate_proto.h"

#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::scheduler {
namespace {

using ::testing::ElementsAre;

TEST(GenerateProtoTest, RequestDefaultsAreNotGiven) {
  v1::GenerateRequest proto;
  proto.set_text("hi");
  const GenerateRequest request = FromProto(proto).value();
  EXPECT_EQ(request.prompt_text, "hi");
  EXPECT_FALSE(request.max_tokens_given);
  EXPECT_FALSE(request.seed_given);
  EXPECT_EQ(request.params.sampling.top_p, 1.0f);  // 0: unset
  EXPECT_EQ(request.params.logits_processors.repetition_penalty, 1.0f);  // 0: unset
  EXPECT_FALSE(request.params.logits_processors.penalties());

  proto.Clear();
  EXPECT_FALSE(FromProto(proto)->prompt_text.has_value());
  EXPECT_FALSE(FromProto(proto)->prompt_ids.has_value());
  EXPECT_FALSE(FromProto(proto)->params.num_logprobs.has_value());
}

TEST(GenerateProtoTest, ChatPromptBecomesTheTemplatesMessages) {
  v1::GenerateRequest proto;
  v1::ChatMessage* user = proto.mutable_chat()->add_messages();
  user->set_role("user");
  user->set_content("hi");
  v1::ChatMessage* call = proto.mutable_chat()->add_messages();
  call->set_role("assistant");  // no content: null
  call->set_tool_calls_json(R"([{"id": "c1", "type": "function"}])");
  v1::ChatMessage* result = proto.mutable_chat()->add_messages();
  result->set_role("tool");
  result->set_content("42");
  result->set_tool_call_id("c1");
  proto.mutable_chat()->set_tools_json(R"([{"type": "function"}])");
  proto.mutable_chat()->set_chat_template_kwargs_json(R"({"enable_thinking": false})");
  absl::StatusOr<GenerateRequest> request = FromProto(proto);
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_TRUE(request->chat.has_value());
  EXPECT_EQ(request->chat->messages.dump(),
            R"([{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":)"
            R"([{"id":"c1","type":"function"}]},{"role":"tool","content":"42","tool_call_id":"c1"}])");
  EXPECT_TRUE(request->chat->options.add_generation_prompt);  // unset: true
  EXPECT_EQ(request->chat->options.tools->dump(), R"([{"type":"function"}])");
  EXPECT_EQ(request->chat->options.template_kwargs.dump(), R"({"enable_thinking":false})");
  EXPECT_TRUE(ValidateRequest(*request).ok());

  proto.mutable_chat()->set_add_generation_prompt(false);
  EXPECT_FALSE(FromProto(proto)->chat->options.add_generation_prompt);
  proto.mutable_chat()->set_tools_json("{not json");
  EXPECT_EQ(FromProto(proto).status().message(), "chat.tools_json must be a JSON array");
  proto.mutable_chat()->clear_tools_json();
  proto.mutable_chat()->mutable_messages(1)->set_tool_calls_json("{}");
  EXPECT_EQ(FromProto(proto).status().message(), "chat.messages[1].tool_calls_json must be a JSON array");
  proto.mutable_chat()->clear_messages();
  EXPECT_EQ(ValidateRequest(FromProto(proto).value()).message(),
            "'messages' must be a non-empty array of message objects");
}

TEST(GenerateProtoTest, RequestFields) {
  v1::GenerateRequest proto;
  proto.set_request_id("r");
  proto.set_model("m");
  proto.mutable_token_ids()->add_ids(5);
  proto.mutable_sampling()->set_temperature(0.5f);
  proto.mutable_sampling()->set_top_k(3);
  proto.mutable_sampling()->set_top_p(0.9f);
  proto.mutable_sampling()->set_seed(0);  // given, even if 0
  proto.mutable_stop()->set_max_tokens(7);
  proto.mutable_stop()->add_stop("END");
  proto.mutable_stop()->add_stop_token_ids(2);
  proto.mutable_stop()->set_ignore_eos(true);
  proto.set_logprobs(3);
  proto.mutable_sampling()->set_presence_penalty(0.5f);
  proto.mutable_sampling()->set_frequency_penalty(-0.25f);
  proto.mutable_sampling()->set_repetition_penalty(1.1f);
  proto.mutable_sampling()->set_min_p(0.05f);
  (*proto.mutable_sampling()->mutable_logit_bias())[9] = -2.0f;
  proto.mutable_stop()->set_min_tokens(4);
  const GenerateRequest request = FromProto(proto).value();
  const runtime::LogitsProcessorOptions& processors = request.params.logits_processors;
  EXPECT_EQ(processors.presence_penalty, 0.5f);
  EXPECT_EQ(processors.frequency_penalty, -0.25f);
  EXPECT_EQ(processors.repetition_penalty, 1.1f);
  EXPECT_EQ(request.params.sampling.min_p, 0.05f);
  EXPECT_EQ(processors.logit_bias, (std::map<int32_t, float>{{9, -2.0f}}));
  EXPECT_EQ(processors.min_tokens, 4);
  EXPECT_EQ(request.request_id, "r");
  EXPECT_EQ(request.model, "m");
  EXPECT_THAT(*request.prompt_ids, ElementsAre(5));
  EXPECT_EQ(request.params.sampling.temperature, 0.5f);
  EXPECT_EQ(request.params.sampling.top_k, 3);
  EXPECT_EQ(request.params.sampling.top_p, 0.9f);
  EXPECT_TRUE(request.seed_given);
  EXPECT_TRUE(request.max_tokens_given);
  EXPECT_EQ(request.params.max_tokens, 7);
  EXPECT_THAT(request.stop_strings, ElementsAre("END"));
  EXPECT_THAT(request.params.stop_token_ids, ElementsAre(2));
  EXPECT_TRUE(request.params.ignore_eos);
  EXPECT_EQ(request.params.num_logprobs, 3);
}

TEST(GenerateProtoTest, Chunk) {
  GenerateChunk chunk{.request_id = "r", .text = "ab", .token_ids = {1, 2},
                      .logprobs = {{{1, -0.5f}}, {{2, -0.25f}}}};
  v1::GenerateResponse proto;
  ToProto(chunk, &proto);
  EXPECT_EQ(proto.request_id(), "r");
  EXPECT_EQ(proto.text(), "ab");
  EXPECT_THAT(proto.token_ids(), ElementsAre(1, 2));
  ASSERT_EQ(proto.logprobs_size(), 2);
  EXPECT_EQ(proto.logprobs(1).top(0).logprob(), -0.25f);
  EXPECT_FALSE(proto.has_timing());
  EXPECT_EQ(proto.finish_reason(), v1::FINISH_REASON_UNSPECIFIED);
  EXPECT_EQ(proto.num_generated_tokens(), 0);

  chunk.timing.kv_transfer_end_us = 9;
  chunk.timing.token_emit_us = {10, 11};
  chunk.finish_reason = runtime::FinishReason::kStop;
  chunk.prompt_token_ids = {4};
  chunk.num_prompt_tokens = 1;
  chunk.num_generated_tokens = 2;
  proto.Clear();
  ToProto(chunk, &proto);
  EXPECT_EQ(proto.timing().kv_transfer_end_us(), 9);
  EXPECT_THAT(proto.timing().token_emit_us(), ElementsAre(10, 11));
  EXPECT_EQ(proto.finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_THAT(proto.prompt_token_ids(), ElementsAre(4));
  EXPECT_EQ(proto.num_prompt_tokens(), 1);
  EXPECT_EQ(proto.num_generated_tokens(), 2);
}

}  // namespace
}  // namespace baton::scheduler
