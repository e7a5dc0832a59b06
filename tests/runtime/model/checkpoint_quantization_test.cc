#include "runtime/model/checkpoint_quantization.h"

#include <string>
#include <tuple>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;
using Json = nlohmann::json;

// config.json's quantization_config as llm-compressor writes it for a channel-wise int8 scheme.
Json Int8Config(const std::string& format) {
  return Json::parse(R"({"quantization_config": {
      "quant_method": "compressed-tensors", "format": ")" + format + R"(",
      "quantization_status": "compressed", "kv_cache_scheme": null,
      "ignore": ["lm_head", "re:.*layers\\.1\\.mlp\\.down_proj$"],
      "config_groups": {"group_0": {"targets": ["Linear"],
        "weights": {"num_bits": 8, "type": "int", "symmetric": true, "strategy": "channel",
                    "group_size": null, "dynamic": false, "actorder": null, "observer": "minmax"},
        "input_activations": {"num_bits": 8, "type": "int", "symmetric": true,
                              "strategy": "token", "dynamic": true}}}}})");
}

TEST(CheckpointQuantizationTest, AbsentIsNone) {
  auto q = ReadCheckpointQuantization(Json::parse(R"({"model_type": "llama"})"), "config.json");
  ASSERT_THAT(q, IsOk());
  EXPECT_FALSE(q->has_value());
}

TEST(CheckpointQuantizationTest, ReadsChannelWiseInt8InBothLayouts) {
  for (const auto& [format, layout] :
       {std::pair{"int-quantized", CheckpointQuantization::Layout::kInt8},
        std::pair{"naive-quantized", CheckpointQuantization::Layout::kInt8},
        std::pair{"pack-quantized", CheckpointQuantization::Layout::kPacked8}}) {
    auto q = ReadCheckpointQuantization(Int8Config(format), "config.json");
    ASSERT_THAT(q, IsOk()) << format;
    ASSERT_TRUE(q->has_value());
    EXPECT_EQ((*q)->layout, layout);
    EXPECT_EQ((*q)->format, format);
    EXPECT_TRUE((*q)->Quantizes("model.layers.0.self_attn.q_proj"));
    EXPECT_TRUE((*q)->Quantizes("model.layers.0.mlp.down_proj"));
    EXPECT_FALSE((*q)->Quantizes("lm_head"));
    EXPECT_FALSE((*q)->Quantizes("model.layers.1.mlp.down_proj"));  // by the regular expression
  }
}

// Everything else is refused by name: never read as something it is not.
TEST(CheckpointQuantizationTest, RefusesWhatItCannotReadNamingTheField) {
  struct Case {
    std::string json_patch;  // applied to quantization_config
    std::string message;
  };
  const Case cases[] = {
      {R"([{"op": "replace", "path": "/quant_method", "value": "bitsandbytes"}])",
       "quant_method 'bitsandbytes'"},
      {R"([{"op": "replace", "path": "/format", "value": "float-quantized"}])",
       "format 'float-quantized'"},
      {R"([{"op": "replace", "path": "/config_groups/group_0/weights/num_bits", "value": 2}])",
       "weights.num_bits 2"},
      {R"([{"op": "replace", "path": "/config_groups/group_0/weights/num_bits", "value": 4}])",
       "weights.strategy channel"},
      {R"([{"op": "replace", "path": "/config_groups/group_0/weights/strategy", "value": "group"}])",
       "weights.strategy group"},
      {R"([{"op": "replace", "path": "/config_groups/group_0/weights/symmetric", "value": false}])",
       "weights.symmetric false"},
      {R"([{"op": "replace", "path": "/config_groups/group_0/weights/type", "value": "float"}])",
       "format 'int-quantized' with fp8 weights"},
      {R"([{"op": "replace", "path": "/config_groups/group_0/weights/type", "value": "mx"}])",
       "weights.type mx"},
      {R"([{"op": "replace", "path": "/config_groups/group_0/weights/actorder", "value": "group"}])",
       "weights.actorder group"},
      {R"([{"op": "replace", "path": "/kv_cache_scheme", "value": {"num_bits": 8}}])",
       "kv_cache_scheme"},
      {R"([{"op": "replace", "path": "/quantization_status", "value": "frozen"}])",
       "quantization_status frozen"},
      {R"([{"op": "replace", "path": "/config_groups/group_0/targets", "value": ["Attention"]}])",
       "targets"},
  };
  for (const Case& c : cases) {
    Json config = Int8Config("int-quantized");
    config["quantization_config"] = config["quantization_config"].patch(Json::parse(c.json_patch));
    EXPECT_THAT(ReadCheckpointQuantization(config, "m/config.json"),
                StatusIs(absl::StatusCode::kUnimplemented, HasSubstr(c.message)))
        << c.json_patch;
  }
  Json bad_regex = Int8Config("int-quantized");
  bad_regex["quantization_config"]["ignore"] = Json::array({"re:(unclosed"});
  EXPECT_THAT(ReadCheckpointQuantization(bad_regex, "m/config.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a valid regular")));
}

// llm-compressor's W4A16 scheme: int4, symmetric, groups of 128, pack-quantized.
Json Int4Config() {
  Json config = Int8Config("pack-quantized");
  Json& weights = config["quantization_config"]["config_groups"]["group_0"]["weights"];
  weights["num_bits"] = 4;
  weights["strategy"] = "group";
  weights["group_size"] = 128;
  config["quantization_config"]["config_groups"]["group_0"].erase("input_activations");
  return config;
}

TEST(CheckpointQuantizationTest, ReadsGroupedInt4PackQuantized) {
  auto q = ReadCheckpointQuantization(Int4Config(), "config.json");
  ASSERT_THAT(q, IsOk());
  ASSERT_TRUE(q->has_value());
  EXPECT_EQ((*q)->layout, CheckpointQuantization::Layout::kPacked4);
  EXPECT_EQ((*q)->weight_dtype, DType::kI4);
  EXPECT_EQ((*q)->group_size, 128);
  EXPECT_FALSE((*q)->Quantizes("lm_head"));
  Json naive = Int4Config();
  naive["quantization_config"]["format"] = "naive-quantized";
  EXPECT_THAT(ReadCheckpointQuantization(naive, "m/config.json"),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("with 4-bit weights")));
  Json asymmetric = Int4Config();
  asymmetric["quantization_config"]["config_groups"]["group_0"]["weights"]["symmetric"] = false;
  EXPECT_THAT(ReadCheckpointQuantization(asymmetric, "m/config.json"),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("weights.symmetric false")));
}

// transformers' config.json for an AutoAWQ checkpoint.
Json AwqConfig() {
  return Json::parse(R"({"quantization_config": {"quant_method": "awq", "bits": 4,
      "group_size": 128, "zero_point": true, "version": "gemm",
      "modules_to_not_convert": ["visual"]}})");
}

TEST(CheckpointQuantizationTest, ReadsAwqGemm) {
  auto q = ReadCheckpointQuantization(AwqConfig(), "config.json");
  ASSERT_THAT(q, IsOk());
  ASSERT_TRUE(q->has_value());
  EXPECT_EQ((*q)->layout, CheckpointQuantization::Layout::kAwq);
  EXPECT_EQ((*q)->weight_dtype, DType::kI4);
  EXPECT_EQ((*q)->group_size, 128);
  EXPECT_TRUE((*q)->Quantizes("model.layers.0.mlp.down_proj"));
  EXPECT_FALSE((*q)->Quantizes("lm_head"));
  EXPECT_FALSE((*q)->Quantizes("model.visual.blocks.0.proj"));  // a substring, as vLLM matches
  for (const auto& [key, value, message] :
       {std::tuple{"version", Json("gemv"), "version gemv"},
        std::tuple{"zero_point", Json(false), "zero_point false"},
        std::tuple{"bits", Json(8), "bits 8"}}) {
    Json config = AwqConfig();
    config["quantization_config"][key] = value;
    EXPECT_THAT(ReadCheckpointQuantization(config, "m/config.json"),
                StatusIs(absl::StatusCode::kUnimplemented, HasSubstr(message)));
  }
}

Json GptqConfig() {
  return Json::parse(R"({"quantization_config": {"quant_method": "gptq", "bits": 4,
      "group_size": 128, "desc_act": false, "sym": true, "damp_percent": 0.01}})");
}

TEST(CheckpointQuantizationTest, ReadsGptqWithoutActOrder) {
  auto q = ReadCheckpointQuantization(GptqConfig(), "config.json");
  ASSERT_THAT(q, IsOk());
  ASSERT_TRUE(q->has_value());
  EXPECT_EQ((*q)->layout, CheckpointQuantization::Layout::kGptq);
  EXPECT_EQ((*q)->group_size, 128);
  EXPECT_TRUE((*q)->gptq_zero_minus_one);
  EXPECT_FALSE((*q)->Quantizes("lm_head"));
  Json v2 = GptqConfig();
  v2["quantization_config"]["checkpoint_format"] = "gptq_v2";
  v2["quantization_config"]["group_size"] = -1;  // one group per row
  q = ReadCheckpointQuantization(v2, "config.json");
  ASSERT_THAT(q, IsOk());
  EXPECT_FALSE((*q)->gptq_zero_minus_one);
  EXPECT_EQ((*q)->group_size, 0);
  for (const auto& [key, value, message] :
       {std::tuple{"desc_act", Json(true), "desc_act true"},
        std::tuple{"bits", Json(8), "bits 8"},
        std::tuple{"lm_head", Json(true), "lm_head true"},
        std::tuple{"checkpoint_format", Json("marlin"), "checkpoint_format 'marlin'"},
        std::tuple{"group_size", Json(0), "group_size 0"}}) {
    Json config = GptqConfig();
    config["quantization_config"][key] = value;
    EXPECT_THAT(ReadCheckpointQuantization(config, "m/config.json"),
                StatusIs(absl::StatusCode::kUnimplemented, HasSubstr(message)));
  }
}

// llm-compressor's FP8 schemes: E4M3 weights per tensor (FP8), per channel (FP8_DYNAMIC) or in
// 128 x 128 blocks (FP8_BLOCK), float-quantized; the activations' scheme is not applied.
Json Fp8CompressedTensorsConfig(const std::string& strategy) {
  Json config = Int8Config("float-quantized");
  Json& weights = config["quantization_config"]["config_groups"]["group_0"]["weights"];
  weights["type"] = "float";
  weights["strategy"] = strategy;
  if (strategy == "block") weights["block_structure"] = Json::array({128, 128});
  config["quantization_config"]["config_groups"]["group_0"]["input_activations"]["type"] = "float";
  return config;
}

TEST(CheckpointQuantizationTest, ReadsCompressedTensorsFp8PerTensorChannelAndBlock) {
  for (const char* strategy : {"tensor", "channel", "block"}) {
    auto q = ReadCheckpointQuantization(Fp8CompressedTensorsConfig(strategy), "config.json");
    ASSERT_THAT(q, IsOk()) << strategy;
    ASSERT_TRUE(q->has_value());
    EXPECT_EQ((*q)->layout, CheckpointQuantization::Layout::kFp8);
    EXPECT_EQ((*q)->weight_dtype, DType::kF8E4M3);
    EXPECT_EQ((*q)->fp8_scale_name, "weight_scale");
    EXPECT_EQ((*q)->fp8_block_cols, std::string(strategy) == "block" ? 128 : 0);
    EXPECT_FALSE((*q)->Quantizes("lm_head"));  // the config's ignore list
    EXPECT_TRUE((*q)->Quantizes("model.layers.0.mlp.up_proj"));
  }
  for (const auto& [key, value, message] :
       {std::tuple{"num_bits", Json(4), "weights.num_bits 4"},
        std::tuple{"strategy", Json("group"), "weights.strategy 'group'"},
        std::tuple{"symmetric", Json(false), "weights.symmetric false"}}) {
    Json config = Fp8CompressedTensorsConfig("channel");
    config["quantization_config"]["config_groups"]["group_0"]["weights"][key] = value;
    EXPECT_THAT(ReadCheckpointQuantization(config, "m/config.json"),
                StatusIs(absl::StatusCode::kUnimplemented, HasSubstr(message)));
  }
  Json bad_block = Fp8CompressedTensorsConfig("block");
  bad_block["quantization_config"]["config_groups"]["group_0"]["weights"]["block_structure"] =
      Json::array({128});
  EXPECT_THAT(ReadCheckpointQuantization(bad_block, "m/config.json"),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("block_structure [128]")));
}

// transformers' FineGrainedFP8 (DeepSeek-V3, Qwen3-FP8) and vLLM's own fp8 serialization.
Json Fp8Config() {
  return Json::parse(R"({"quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
      "activation_scheme": "dynamic", "weight_block_size": [128, 128],
      "modules_to_not_convert": ["model.layers.0.mlp.gate_proj"]}})");
}

TEST(CheckpointQuantizationTest, ReadsFp8BlockWiseAndPerTensor) {
  auto q = ReadCheckpointQuantization(Fp8Config(), "config.json");
  ASSERT_THAT(q, IsOk());
  ASSERT_TRUE(q->has_value());
  EXPECT_EQ((*q)->layout, CheckpointQuantization::Layout::kFp8);
  EXPECT_EQ((*q)->fp8_scale_name, "weight_scale_inv");
  EXPECT_EQ((*q)->fp8_block_rows, 128);
  EXPECT_EQ((*q)->fp8_block_cols, 128);
  EXPECT_FALSE((*q)->Quantizes("lm_head"));
  EXPECT_FALSE((*q)->Quantizes("model.layers.0.mlp.gate_proj"));
  EXPECT_TRUE((*q)->Quantizes("model.layers.1.mlp.gate_proj"));
  Json per_tensor = Fp8Config();
  per_tensor["quantization_config"].erase("weight_block_size");
  per_tensor["quantization_config"]["activation_scheme"] = "static";
  per_tensor["quantization_config"]["ignored_layers"] = Json::array({"self_attn.o_proj"});
  q = ReadCheckpointQuantization(per_tensor, "config.json");
  ASSERT_THAT(q, IsOk());
  EXPECT_EQ((*q)->fp8_scale_name, "weight_scale");
  EXPECT_EQ((*q)->fp8_block_cols, 0);
  EXPECT_FALSE((*q)->Quantizes("model.layers.3.self_attn.o_proj"));
  for (const auto& [key, value, message] :
       {std::tuple{"fmt", Json("e5m2"), "fmt e5m2"},
        std::tuple{"activation_scheme", Json("mxfp8"), "activation_scheme mxfp8"},
        std::tuple{"weight_block_size", Json::array({128, 0}), "weight_block_size [128,0]"},
        std::tuple{"ignored_layers", Json("lm_head"), "ignored_layers"}}) {
    Json config = Fp8Config();
    config["quantization_config"][key] = value;
    EXPECT_THAT(ReadCheckpointQuantization(config, "m/config.json"),
                StatusIs(absl::StatusCode::kUnimplemented, HasSubstr(message)));
  }
}

}  // namespace
}  // namespace baton::runtime
