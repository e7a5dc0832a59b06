#include "runtime/model/model_config.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/safetensors_writer.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::baton::testing::ScopedTempDir;
using ::baton::testing::TinyConfigJson;
using ::baton::testing::TinyModelSpec;
using ::baton::testing::WriteTextFile;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Optional;
using Json = nlohmann::json;

class ModelConfigTest : public ::testing::Test {
 protected:
  // Writes `config` (and `generation_config` unless null) and loads the directory.
  absl::StatusOr<ModelConfig> Load(const Json& config, const Json& generation_config = nullptr) {
    BATON_CHECK(WriteTextFile(dir_.path() / "config.json", config.dump()).ok());
    if (!generation_config.is_null()) {
      BATON_CHECK(
          WriteTextFile(dir_.path() / "generation_config.json", generation_config.dump()).ok());
    }
    return LoadModelConfig(dir_.path());
  }

  Json Llama() const { return TinyConfigJson(TinyModelSpec{}); }

  ScopedTempDir dir_;
};

TEST_F(ModelConfigTest, ReadsEveryLlamaField) {
  Json config = Llama();
  config["torch_dtype"] = "bfloat16";
  config["rope_theta"] = 500000.0;
  config["tie_word_embeddings"] = true;
  absl::StatusOr<ModelConfig> loaded = Load(config);
  ASSERT_THAT(loaded, IsOk());
  EXPECT_EQ(loaded->architecture, "LlamaForCausalLM");
  EXPECT_EQ(loaded->hidden_size, 16);
  EXPECT_EQ(loaded->num_layers, 2);
  EXPECT_EQ(loaded->num_heads, 4);
  EXPECT_EQ(loaded->num_kv_heads, 2);
  EXPECT_EQ(loaded->head_dim, 4);
  EXPECT_EQ(loaded->intermediate_size, 24);
  EXPECT_EQ(loaded->vocab_size, 40);
  EXPECT_EQ(loaded->max_position_embeddings, 256);
  EXPECT_EQ(loaded->max_model_len, 256);
  EXPECT_FLOAT_EQ(loaded->rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(loaded->rope_theta, 500000.0f);
  EXPECT_EQ(loaded->rope_scaling.type, kernels::RopeScalingType::kNone);
  EXPECT_TRUE(loaded->tie_word_embeddings);
  EXPECT_FALSE(loaded->attention_bias);
  EXPECT_FALSE(loaded->sliding_window.has_value());
  EXPECT_EQ(loaded->torch_dtype, DType::kBF16);
  EXPECT_THAT(loaded->bos_token_id, Optional(1));
  EXPECT_THAT(loaded->eos_token_ids, ElementsAre(2));
  EXPECT_FALSE(loaded->default_temperature.has_value());
}

TEST_F(ModelConfigTest, AbsentOptionalFieldsTakeTransformersDefaults) {
  Json config = Llama();
  for (const char* key : {"num_key_value_heads", "rms_norm_eps", "rope_theta", "rope_scaling",
                          "max_position_embeddings", "tie_word_embeddings", "torch_dtype",
                          "bos_token_id", "eos_token_id", "hidden_act"}) {
    config.erase(key);
  }
  config["head_dim"] = nullptr;  // transformers writes null for "derive it"
  absl::StatusOr<ModelConfig> loaded = Load(config);
  ASSERT_THAT(loaded, IsOk());
  EXPECT_EQ(loaded->num_kv_heads, 4);
  EXPECT_EQ(loaded->head_dim, 4);
  EXPECT_FLOAT_EQ(loaded->rms_norm_eps, 1e-6f);
  EXPECT_FLOAT_EQ(loaded->rope_theta, 10000.0f);
  EXPECT_EQ(loaded->max_position_embeddings, 2048);
  EXPECT_FALSE(loaded->tie_word_embeddings);
  EXPECT_EQ(loaded->torch_dtype, DType::kF32);
  EXPECT_FALSE(loaded->bos_token_id.has_value());
  EXPECT_TRUE(loaded->eos_token_ids.empty());
}

TEST_F(ModelConfigTest, ExplicitHeadDimNeedNotDivideHidden) {
  Json config = Llama();
  config["head_dim"] = 8;       // like Mistral Nemo: heads * head_dim != hidden_size
  config["dtype"] = "float16";  // transformers >= 4.56 spelling
  config.erase("torch_dtype");
  absl::StatusOr<ModelConfig> loaded = Load(config);
  ASSERT_THAT(loaded, IsOk());
  EXPECT_EQ(loaded->head_dim, 8);
  EXPECT_EQ(loaded->torch_dtype, DType::kF16);
}

TEST_F(ModelConfigTest, ParsesLlama3RopeScaling) {
  Json config = Llama();
  config["rope_scaling"] = {{"rope_type", "llama3"},
                            {"factor", 8.0},
                            {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0},
                            {"original_max_position_embeddings", 8192}};
  absl::StatusOr<ModelConfig> loaded = Load(config);
  ASSERT_THAT(loaded, IsOk());
  EXPECT_EQ(loaded->rope_scaling.type, kernels::RopeScalingType::kLlama3);
  EXPECT_FLOAT_EQ(loaded->rope_scaling.factor, 8.0f);
  EXPECT_FLOAT_EQ(loaded->rope_scaling.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(loaded->rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(loaded->rope_scaling.original_max_position, 8192);
}

TEST_F(ModelConfigTest, ParsesLinearRopeScalingUnderOldKey) {
  Json config = Llama();
  config["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  absl::StatusOr<ModelConfig> loaded = Load(config);
  ASSERT_THAT(loaded, IsOk());
  EXPECT_EQ(loaded->rope_scaling.type, kernels::RopeScalingType::kLinear);
  EXPECT_FLOAT_EQ(loaded->rope_scaling.factor, 2.0f);
}

TEST_F(ModelConfigTest, ReadsTransformersV5RopeParameters) {
  Json config = Llama();
  config.erase("rope_theta");
  config.erase("rope_scaling");
  config["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000.0}};
  absl::StatusOr<ModelConfig> loaded = Load(config);
  ASSERT_THAT(loaded, IsOk());
  EXPECT_EQ(loaded->rope_scaling.type, kernels::RopeScalingType::kNone);
  EXPECT_FLOAT_EQ(loaded->rope_theta, 1000000.0f);
}

TEST_F(ModelConfigTest, OtherRopeTypesAreUnimplemented) {
  Json config = Llama();
  config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_THAT(Load(config), StatusIs(absl::StatusCode::kUnimplemented,
                                     AllOf(HasSubstr("config.json"), HasSubstr("rope_scaling"),
                                           HasSubstr("'yarn'"))));
}

TEST_F(ModelConfigTest, Llama3RopeScalingMissingKeyNamesIt) {
  Json config = Llama();
  config["rope_scaling"] = {{"rope_type", "llama3"},
                            {"factor", 8.0},
                            {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0}};
  EXPECT_THAT(Load(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'original_max_position_embeddings' is required")));
}

TEST_F(ModelConfigTest, Qwen2HasQkvBiasAndIgnoresDisabledSlidingWindow) {
  TinyModelSpec spec;
  spec.architecture = "Qwen2ForCausalLM";
  Json config = TinyConfigJson(spec);
  config["use_sliding_window"] = false;
  config["sliding_window"] = 32;
  absl::StatusOr<ModelConfig> loaded = Load(config);
  ASSERT_THAT(loaded, IsOk());
  EXPECT_TRUE(loaded->attention_bias);
  EXPECT_FALSE(loaded->sliding_window.has_value());
  EXPECT_EQ(loaded->max_model_len, 256);
}

TEST_F(ModelConfigTest, MistralSlidingWindowCapsMaxModelLen) {
  TinyModelSpec spec;
  spec.architecture = "MistralForCausalLM";
  Json config = TinyConfigJson(spec);
  config["sliding_window"] = 64;
  absl::StatusOr<ModelConfig> loaded = Load(config);
  ASSERT_THAT(loaded, IsOk());
  EXPECT_FALSE(loaded->attention_bias);
  EXPECT_THAT(loaded->sliding_window, Optional(64));
  EXPECT_EQ(loaded->max_model_len, 64);

  config["sliding_window"] = nullptr;  // Mistral v0.2+
  loaded = Load(config);
  ASSERT_THAT(loaded, IsOk());
  EXPECT_FALSE(loaded->sliding_window.has_value());
  EXPECT_EQ(loaded->max_model_len, 256);

  config["sliding_window"] = 4096;  // wider than the context: no effect
  loaded = Load(config);
  ASSERT_THAT(loaded, IsOk());
  EXPECT_FALSE(loaded->sliding_window.has_value());
}

TEST_F(ModelConfigTest, GenerationConfigExtendsEosAndSetsSamplingDefaults) {
  Json config = Llama();
  config["eos_token_id"] = {2, 7};
  const Json generation = {{"bos_token_id", 5},  {"eos_token_id", {7, 9}},
                           {"temperature", 0.6}, {"top_p", 0.9},
                           {"top_k", 40},        {"do_sample", true}};
  absl::StatusOr<ModelConfig> loaded = Load(config, generation);
  ASSERT_THAT(loaded, IsOk());
  EXPECT_THAT(loaded->bos_token_id, Optional(5));
  EXPECT_THAT(loaded->eos_token_ids, ElementsAre(2, 7, 9));
  EXPECT_THAT(loaded->default_temperature, Optional(0.6f));
  EXPECT_THAT(loaded->default_top_p, Optional(0.9f));
  EXPECT_THAT(loaded->default_top_k, Optional(40));
}

TEST_F(ModelConfigTest, MissingConfigIsNotFound) {
  EXPECT_THAT(LoadModelConfig(dir_.path()),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("config.json"), HasSubstr("not found"))));
}

TEST_F(ModelConfigTest, MalformedJsonIsInvalid) {
  ASSERT_THAT(WriteTextFile(dir_.path() / "config.json", R"({"hidden_size": 16,)"), IsOk());
  EXPECT_THAT(LoadModelConfig(dir_.path()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("config.json"), HasSubstr("malformed JSON"))));
}

TEST_F(ModelConfigTest, MalformedGenerationConfigIsInvalid) {
  ASSERT_THAT(WriteTextFile(dir_.path() / "generation_config.json", "{"), IsOk());
  EXPECT_THAT(Load(Llama()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("generation_config.json"), HasSubstr("malformed JSON"))));
}

TEST_F(ModelConfigTest, UnknownArchitectureListsSupportedOnes) {
  Json config = Llama();
  config["architectures"] = {"GPT2LMHeadModel"};
  EXPECT_THAT(Load(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("config.json: architectures[0] 'GPT2LMHeadModel' is not supported "
                                 "(supported: LlamaForCausalLM, MistralForCausalLM, "
                                 "Qwen2ForCausalLM)")));
}

// Field errors: each case edits the tiny Llama config and names the field the message must blame.
struct FieldErrorCase {
  std::string label;
  std::string key;
  Json value;  // null: erase the key
  absl::StatusCode code;
  std::string message;
};

class ModelConfigFieldErrorTest : public ModelConfigTest,
                                  public ::testing::WithParamInterface<FieldErrorCase> {};

TEST_P(ModelConfigFieldErrorTest, NamesFileAndField) {
  const FieldErrorCase& c = GetParam();
  Json config = Llama();
  if (c.value.is_null()) {
    config.erase(c.key);
  } else {
    config[c.key] = c.value;
  }
  EXPECT_THAT(Load(config),
              StatusIs(c.code, AllOf(HasSubstr("config.json"), HasSubstr(c.message))));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ModelConfigFieldErrorTest,
    ::testing::Values(
        FieldErrorCase{"MissingHiddenSize", "hidden_size", nullptr,
                       absl::StatusCode::kInvalidArgument,
                       "field 'hidden_size' is required but missing"},
        FieldErrorCase{"MissingArchitectures", "architectures", nullptr,
                       absl::StatusCode::kInvalidArgument, "field 'architectures'"},
        FieldErrorCase{"StringHiddenSize", "hidden_size", "16", absl::StatusCode::kInvalidArgument,
                       "field 'hidden_size' must be an integer, got \"16\""},
        FieldErrorCase{"FloatLayers", "num_hidden_layers", 2.5, absl::StatusCode::kInvalidArgument,
                       "'num_hidden_layers' must be an integer"},
        FieldErrorCase{"ZeroVocab", "vocab_size", 0, absl::StatusCode::kInvalidArgument,
                       "field 'vocab_size' must be positive, got 0"},
        FieldErrorCase{"NegativeIntermediate", "intermediate_size", -3,
                       absl::StatusCode::kInvalidArgument, "'intermediate_size' must be positive"},
        FieldErrorCase{"HeadsDoNotDivideHidden", "num_attention_heads", 3,
                       absl::StatusCode::kInvalidArgument,
                       "'num_attention_heads' (3) must divide hidden_size (16)"},
        FieldErrorCase{"KvHeadsDoNotDivideHeads", "num_key_value_heads", 3,
                       absl::StatusCode::kInvalidArgument,
                       "'num_key_value_heads' (3) must divide num_attention_heads (4)"},
        FieldErrorCase{"OddHeadDim", "head_dim", 5, absl::StatusCode::kInvalidArgument,
                       "'head_dim' must be even"},
        FieldErrorCase{"StringEps", "rms_norm_eps", "1e-5", absl::StatusCode::kInvalidArgument,
                       "'rms_norm_eps' must be a number"},
        FieldErrorCase{"BoolTie", "tie_word_embeddings", "yes", absl::StatusCode::kInvalidArgument,
                       "'tie_word_embeddings' must be a boolean"},
        FieldErrorCase{"UnknownDtype", "torch_dtype", "float8", absl::StatusCode::kInvalidArgument,
                       "'torch_dtype' has unsupported value 'float8'"},
        FieldErrorCase{"EosNotInt", "eos_token_id", Json::array({2, "x"}),
                       absl::StatusCode::kInvalidArgument, "'eos_token_id' must be an integer"},
        FieldErrorCase{"RopeScalingNotObject", "rope_scaling", "llama3",
                       absl::StatusCode::kInvalidArgument, "'rope_scaling' must be an object"},
        FieldErrorCase{"GeluActivation", "hidden_act", "gelu", absl::StatusCode::kUnimplemented,
                       "'hidden_act' is 'gelu'"},
        FieldErrorCase{"LlamaAttentionBias", "attention_bias", true,
                       absl::StatusCode::kUnimplemented, "'attention_bias' is true"},
        FieldErrorCase{"MlpBias", "mlp_bias", true, absl::StatusCode::kUnimplemented,
                       "'mlp_bias' is true"}),
    [](const auto& info) { return info.param.label; });

}  // namespace
}  // namespace baton::runtime
