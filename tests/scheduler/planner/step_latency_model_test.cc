#include "scheduler/planner/step_latency_model.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/scheduler/planner/planner_test_util.h"

namespace baton::scheduler::planner {
namespace {

using testing::TestCoefficients;
using testing::TestDevice;
using testing::TestModel;

const StepLatencyModel& Model() {
  static const StepLatencyModel model(TestCoefficients({.a_ms = 10, .b_ms = 0.1, .c_ms = 1e-4},
                                                       {.a_ms = 5, .b_ms = 0.001, .c_ms = 0.2}),
                                      TestModel(), TestDevice());
  return model;
}

TEST(StepLatencyModelTest, PrefillAndDecodeStepsFollowTheCoefficients) {
  EXPECT_DOUBLE_EQ(Model().StageMs({1, 1}, {.prompt_tokens = 100, .prompt_tokens_squared = 1e4}, false),
                   10 + 10 + 1);
  EXPECT_DOUBLE_EQ(Model().StageMs({1, 1}, {.num_decode_seqs = 10, .decode_context = 1000}, false), 5 + 1 + 2);
  EXPECT_EQ(Model().StageMs({1, 1}, {}, false), 0);
}

// A mixed step reads the weights once: the decode part adds only its per-token and per-sequence terms.
TEST(StepLatencyModelTest, MixedStepAddsTheDecodeTermsWithoutItsIntercept) {
  const MicroBatchShape mixed{.prompt_tokens = 100, .prompt_tokens_squared = 1e4, .num_decode_seqs = 10,
                              .decode_context = 1000};
  EXPECT_DOUBLE_EQ(Model().StageMs({1, 1}, mixed, false), 21 + 1 + 2);
}

// pp stages split the pass and add the activations' send: tokens x hidden x 2 bytes over the link.
TEST(StepLatencyModelTest, PipelineStagesSplitTheWorkAndPayTheLink) {
  const MicroBatchShape decode{.num_decode_seqs = 10, .decode_context = 1000};
  const double send_intra_ms = 10.0 * 1024 * 2 / 1e9 * 1e3;
  const double send_inter_ms = 10.0 * 1024 * 2 / 1e8 * 1e3;
  EXPECT_DOUBLE_EQ(Model().StageMs({1, 2}, decode, false), 8.0 / 2 + send_intra_ms);
  EXPECT_DOUBLE_EQ(Model().StageMs({1, 2}, decode, true), 8.0 / 2 + send_inter_ms);
}

TEST(StepLatencyModelTest, KvTransferUsesEveryRankLinkInParallel) {
  const double bytes = 1000.0 * TestModel().KvBytesPerToken();
  EXPECT_DOUBLE_EQ(Model().KvTransferMs(1000, {1, 1}, {1, 1}, true), bytes / 1e9 * 1e3);
  EXPECT_DOUBLE_EQ(Model().KvTransferMs(1000, {2, 1}, {2, 1}, true), bytes / 2e9 * 1e3);
  EXPECT_DOUBLE_EQ(Model().KvTransferMs(1000, {2, 1}, {1, 1}, false), bytes / 1e8 * 1e3);
}

TEST(StepLatencyModelTest, KvCapacityIsMemoryLessWeights) {
  const ModelShape shape = TestModel();
  const double per_device = 16.0 * (1ull << 30);
  EXPECT_EQ(Model().KvCapacityTokens({1, 1}),
            static_cast<int64_t>((per_device - shape.WeightBytes()) / shape.KvBytesPerToken()));
  EXPECT_EQ(Model().KvCapacityTokens({2, 1}),
            static_cast<int64_t>((2 * per_device - shape.WeightBytes()) / shape.KvBytesPerToken()));
}

TEST(StepLatencyModelTest, CheckNamesWhatDoesNotFit) {
  EXPECT_TRUE(Model().Check({1, 1}).ok());
  EXPECT_THAT(std::string(Model().Check({4, 1}).message()), ::testing::HasSubstr("no latency coefficients for tp 4"));
  EXPECT_THAT(std::string(Model().Check({1, 9}).message()), ::testing::HasSubstr("exceeds the 8 layers"));
  DeviceSpec small = TestDevice();
  small.memory_bytes = 1 << 20;
  const StepLatencyModel tight(TestCoefficients({}, {}), TestModel(), small);
  EXPECT_THAT(std::string(tight.Check({1, 1}).message()), ::testing::HasSubstr("too little room for KV"));
}

}  // namespace
}  // namespace baton::scheduler::planner
