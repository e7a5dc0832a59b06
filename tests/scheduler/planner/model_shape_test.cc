#include "scheduler/planner/model_shape.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace baton::scheduler::planner {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(ModelShapeTest, EveryKnownNameResolvesToItsOwnConsistentShape) {
  const std::vector<std::string> names = KnownModelNames();
  ASSERT_GE(names.size(), 10u);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    absl::StatusOr<ModelShape> shape = KnownModelShape(name);
    ASSERT_THAT(shape, IsOk());
    EXPECT_EQ(shape->name, name);
    EXPECT_FALSE(shape->source.empty());
    EXPECT_GT(shape->num_layers, 0);
    EXPECT_EQ(shape->num_heads * shape->head_dim, shape->hidden_size);
    EXPECT_EQ(shape->num_heads % shape->num_kv_heads, 0);
    EXPECT_GT(shape->intermediate_size, shape->hidden_size);
    EXPECT_GT(shape->vocab_size, 0);
    EXPECT_GT(shape->max_context, 0);
    EXPECT_EQ(shape->bytes_per_param, 2);
    EXPECT_EQ(shape->WeightBytes(), 2 * shape->NumParams());
  }
}

TEST(ModelShapeTest, KnownNamesIncludeTheBriefedModels) {
  const std::vector<std::string> names = KnownModelNames();
  for (const char* name : {"opt-13b", "opt-66b", "opt-175b", "llama-2-7b", "llama-2-13b",
                           "llama-2-70b", "llama-3-8b", "llama-3-70b", "mistral-7b", "qwen2-7b"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
}

TEST(ModelShapeTest, NameMatchIgnoresCase) {
  absl::StatusOr<ModelShape> shape = KnownModelShape("Llama-3-8B");
  ASSERT_THAT(shape, IsOk());
  EXPECT_EQ(shape->name, "llama-3-8b");
}

// Published parameter counts: the model cards, or the sum of the checkpoint's tensors.
TEST(ModelShapeTest, NumParamsIsWithinOnePercentOfThePublishedCount) {
  struct Case {
    const char* name;
    double published;
  };
  const Case cases[] = {
      {"llama-2-7b", 6.74e9}, {"llama-2-13b", 13.02e9}, {"llama-2-70b", 68.98e9},
      {"llama-3-8b", 8.03e9}, {"llama-3-70b", 70.55e9}, {"mistral-7b", 7.24e9},
      {"qwen2-7b", 7.62e9},   {"opt-13b", 12.85e9},     {"opt-66b", 65.7e9},
      {"opt-175b", 175e9},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ModelShape> shape = KnownModelShape(c.name);
    ASSERT_THAT(shape, IsOk()) << c.name;
    const double num_params = static_cast<double>(shape->NumParams());
    EXPECT_NEAR(num_params / c.published, 1.0, 0.01)
        << c.name << ": " << num_params << " parameters, published " << c.published;
  }
}

TEST(ModelShapeTest, NumParamsOfLlama2SevenBIsExact) {
  // The sum of the Llama-2-7b-hf checkpoint's tensor sizes.
  EXPECT_EQ(KnownModelShape("llama-2-7b")->NumParams(), 6'738'415'616);
}

TEST(ModelShapeTest, KvBytesPerTokenCountsKAndVOfEveryLayer) {
  struct Case {
    const char* name;
    int64_t kv_bytes;
  };
  const Case cases[] = {
      {"llama-3-8b", 131072},   // 2 * 32 layers * 8 KV heads * 128 * 2 bytes
      {"llama-2-7b", 524288},   // 2 * 32 * 32 * 128 * 2
      {"llama-2-70b", 327680},  // 2 * 80 * 8 * 128 * 2
      {"opt-13b", 819200},      // 2 * 40 * 40 * 128 * 2
  };
  for (const Case& c : cases) {
    EXPECT_EQ(KnownModelShape(c.name)->KvBytesPerToken(), c.kv_bytes) << c.name;
  }
}

TEST(ModelShapeTest, MatmulFlopsAreTwicePerMatmulWeightIncludingTheLmHead) {
  const ModelShape llama = *KnownModelShape("llama-2-7b");
  // Per layer: q, k, v, o (4 * 4096²) and gate, up, down (3 * 4096 * 11008); plus the LM head.
  const double layer = 4.0 * 4096 * 4096 + 3.0 * 4096 * 11008;
  EXPECT_DOUBLE_EQ(llama.MatmulFlopsPerToken(), 2 * (32 * layer + 32000.0 * 4096));
  // OPT ties its LM head to the embeddings, but the head's matmul still runs; the position table
  // is a lookup.
  const ModelShape opt = *KnownModelShape("opt-13b");
  const double opt_layer = 4.0 * 5120 * 5120 + 2.0 * 5120 * 20480;
  EXPECT_DOUBLE_EQ(opt.MatmulFlopsPerToken(), 2 * (40 * opt_layer + 50272.0 * 5120));
}

TEST(ModelShapeTest, AttentionFlopsPerPairAreFourPerHeadDimension) {
  const double per_pair = 4.0 * 32 * 32 * 128;  // 32 layers, 32 heads of 128
  EXPECT_DOUBLE_EQ(KnownModelShape("llama-2-7b")->AttentionFlopsPerTokenPair(), per_pair);
  // GQA shares K and V, not the products: every query head still computes its own.
  EXPECT_DOUBLE_EQ(KnownModelShape("llama-3-8b")->AttentionFlopsPerTokenPair(), per_pair);
}

TEST(ModelShapeTest, UnknownNameIsNotFoundListingTheKnownNames) {
  EXPECT_THAT(
      KnownModelShape("gpt-5"),
      StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("gpt-5"), HasSubstr("llama-3-8b"),
                                                  HasSubstr("opt-175b"), HasSubstr("qwen2-7b"))));
}

runtime::ModelConfig HandMadeConfig() {
  runtime::ModelConfig config;
  config.architecture = "Qwen2ForCausalLM";
  config.hidden_size = 256;
  config.num_layers = 3;
  config.num_heads = 8;
  config.num_kv_heads = 2;
  config.head_dim = 32;
  config.intermediate_size = 512;
  config.vocab_size = 1000;
  config.max_position_embeddings = 32768;
  config.tie_word_embeddings = true;
  config.attention_bias = true;
  config.max_model_len = 4096;
  return config;
}

TEST(ModelShapeTest, FromConfigMapsEveryField) {
  const ModelShape shape =
      ModelShapeFromConfig(HandMadeConfig(), DType::kBF16, "tiny", "/models/tiny/config.json");
  EXPECT_EQ(shape.name, "tiny");
  EXPECT_EQ(shape.source, "/models/tiny/config.json");
  EXPECT_EQ(shape.num_layers, 3);
  EXPECT_EQ(shape.hidden_size, 256);
  EXPECT_EQ(shape.num_heads, 8);
  EXPECT_EQ(shape.num_kv_heads, 2);
  EXPECT_EQ(shape.head_dim, 32);
  EXPECT_EQ(shape.intermediate_size, 512);
  EXPECT_EQ(shape.vocab_size, 1000);
  EXPECT_EQ(shape.max_context, 4096);
  EXPECT_EQ(shape.mlp, MlpKind::kGated);
  EXPECT_TRUE(shape.tie_word_embeddings);
  EXPECT_TRUE(shape.attention_bias);
  EXPECT_EQ(shape.num_learned_positions, 0);
  EXPECT_EQ(shape.bytes_per_param, 2);
  // Per layer: q 256*256, k and v 2 * 256*64, o 256*256, q/k/v bias 256+64+64, MLP 3 * 256*512,
  // two RMSNorms 2*256; then the tied embedding 1000*256 and the final norm 256.
  const int64_t layer =
      256 * 256 + 2 * 256 * 64 + 256 * 256 + (256 + 64 + 64) + 3 * 256 * 512 + 2 * 256;
  EXPECT_EQ(shape.NumParams(), 3 * layer + 1000 * 256 + 256);
  EXPECT_EQ(shape.KvBytesPerToken(), 2 * 3 * 2 * 32 * 4);  // Baton's KV pool is f32
}

TEST(ModelShapeTest, FromConfigTakesBytesFromTheDtypeAndFallsBackToMaxPositions) {
  runtime::ModelConfig config = HandMadeConfig();
  config.max_model_len = 0;
  config.tie_word_embeddings = false;
  const ModelShape f32 = ModelShapeFromConfig(config, DType::kF32, "tiny", "");
  EXPECT_EQ(f32.bytes_per_param, 4);
  EXPECT_EQ(f32.max_context, 32768);
  EXPECT_EQ(f32.WeightBytes(), 4 * f32.NumParams());
  const ModelShape f16 = ModelShapeFromConfig(config, DType::kF16, "tiny", "");
  EXPECT_EQ(f16.bytes_per_param, 2);
  // Untied: the LM head is its own vocab x hidden matrix.
  const ModelShape tied = ModelShapeFromConfig(HandMadeConfig(), DType::kF16, "tiny", "");
  EXPECT_EQ(f16.NumParams() - tied.NumParams(), 1000 * 256);
}

}  // namespace
}  // namespace baton::scheduler::planner
