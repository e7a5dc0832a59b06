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
  const GenerateRequest request = FromProto(proto);
  EXPECT_EQ(request.prompt_text, "hi");
  EXPECT_FALSE(request.max_tokens_given);
  EXPECT_FALSE(request.seed_given);
  EXPECT_EQ(request.params.sampling.top_p, 1.0f);  // 0: unset
  EXPECT_EQ(request.params.logits_processors.repetition_penalty, 1.0f);  // 0: unset
  EXPECT_FALSE(request.params.logits_processors.penalties());

  proto.Clear();
  EXPECT_FALSE(FromProto(proto).prompt_text.has_value());
  EXPECT_FALSE(FromProto(proto).prompt_ids.has_value());
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
  const GenerateRequest request = FromProto(proto);
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
