#include "runtime/model/llama_weights.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/thread_pool.h"
#include "runtime/model/model_config.h"
#include "tests/testing/safetensors_writer.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::baton::testing::ScopedTempDir;
using ::baton::testing::TinyModelSpec;
using ::baton::testing::TinyTensorShapes;
using ::baton::testing::TinyValue;
using ::baton::testing::WriteTinyModel;
using ::testing::AllOf;
using ::testing::HasSubstr;

float ElementAsF32(const Weight& weight, int64_t i) {
  const auto* bytes = static_cast<const std::byte*>(weight.data);
  if (weight.dtype == DType::kF32) {
    float value;
    std::memcpy(&value, bytes + 4 * i, 4);
    return value;
  }
  uint16_t bits;
  std::memcpy(&bits, bytes + 2 * i, 2);
  return weight.dtype == DType::kF16 ? F16ToF32(bits) : Bf16ToF32(bits);
}

// Every Weight of the model with the HF name it was loaded from.
std::vector<std::pair<std::string, const Weight*>> NamedWeights(const LlamaWeights& weights,
                                                                bool tied) {
  std::vector<std::pair<std::string, const Weight*>> named = {
      {"model.embed_tokens.weight", &weights.embed_tokens},
      {"model.norm.weight", &weights.final_norm},
      {tied ? "model.embed_tokens.weight" : "lm_head.weight", &weights.lm_head}};
  for (size_t i = 0; i < weights.layers.size(); ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const LayerWeights& layer = weights.layers[i];
    named.insert(named.end(), {{p + "input_layernorm.weight", &layer.input_norm},
                               {p + "self_attn.q_proj.weight", &layer.q_proj},
                               {p + "self_attn.k_proj.weight", &layer.k_proj},
                               {p + "self_attn.v_proj.weight", &layer.v_proj},
                               {p + "self_attn.o_proj.weight", &layer.o_proj},
                               {p + "post_attention_layernorm.weight", &layer.post_attention_norm},
                               {p + "mlp.gate_proj.weight", &layer.gate_proj},
                               {p + "mlp.up_proj.weight", &layer.up_proj},
                               {p + "mlp.down_proj.weight", &layer.down_proj}});
    if (layer.q_bias.data != nullptr) {
      named.insert(named.end(), {{p + "self_attn.q_proj.bias", &layer.q_bias},
                                 {p + "self_attn.k_proj.bias", &layer.k_bias},
                                 {p + "self_attn.v_proj.bias", &layer.v_bias}});
    }
  }
  return named;
}

bool IsNorm(const std::string& name) {
  return name.find("norm") != std::string::npos || name.ends_with(".bias");
}

// The dtype the loader must produce for `name`.
DType ExpectedDType(const std::string& name, DType stored, DType matmul, bool is_lm_head) {
  if (IsNorm(name)) return DType::kF32;
  if (name == "model.embed_tokens.weight" && !is_lm_head) {
    return stored == DType::kF16 ? DType::kF32 : stored;
  }
  return matmul;
}

class LlamaWeightsTest : public ::testing::Test {
 protected:
  absl::StatusOr<std::unique_ptr<LlamaWeights>> WriteAndLoad(const TinyModelSpec& spec,
                                                             DType matmul_dtype,
                                                             ThreadPool* pool = nullptr) {
    BATON_CHECK(WriteTinyModel(dir_.path(), spec).ok());
    absl::StatusOr<ModelConfig> config = LoadModelConfig(dir_.path());
    BATON_CHECK(config.ok());
    return LoadLlamaWeights(dir_.path(), *config, matmul_dtype, pool);
  }

  // Checks every weight's dtype, shape, values, and whether it is zero-copy exactly when expected.
  void ExpectAllWeights(const LlamaWeights& weights, const TinyModelSpec& spec, DType matmul) {
    const bool tied = spec.tie_word_embeddings;
    std::map<std::string, std::vector<int64_t>> shapes;
    for (const auto& [name, shape] : TinyTensorShapes(spec)) shapes[name] = shape;
    const auto named = NamedWeights(weights, tied);
    size_t expected_count = shapes.size() + (tied ? 1 : 0);
    EXPECT_EQ(named.size(), expected_count);
    for (const auto& [name, weight] : named) {
      SCOPED_TRACE(name);
      const bool is_lm_head = weight == &weights.lm_head;
      const DType expected_dtype = ExpectedDType(name, spec.dtype, matmul, is_lm_head);
      EXPECT_EQ(weight->dtype, expected_dtype);
      EXPECT_EQ(weight->shape, shapes.at(name));
      ASSERT_NE(weight->data, nullptr);
      // Aligned for its element type, whether mapped or owned.
      EXPECT_EQ(reinterpret_cast<uintptr_t>(weight->data) % DTypeBytes(weight->dtype), 0u);
      const bool in_mapping =
          weights.checkpoint->FileOf(name)->Contains(weight->data, weight->num_bytes());
      EXPECT_EQ(in_mapping, expected_dtype == spec.dtype && spec.data_start_remainder == 0);
      // Tiny values are multiples of 1/16 in [-2, 2): exact in every dtype.
      int64_t num_mismatches = 0;
      int64_t first_mismatch_idx = -1;
      for (int64_t i = 0; i < weight->numel(); ++i) {
        if (ElementAsF32(*weight, i) != TinyValue(name, i)) {
          if (num_mismatches++ == 0) first_mismatch_idx = i;
        }
      }
      EXPECT_EQ(num_mismatches, 0)
          << "first at element " << first_mismatch_idx << ": got "
          << ElementAsF32(*weight, std::max<int64_t>(first_mismatch_idx, 0)) << ", expected "
          << TinyValue(name, std::max<int64_t>(first_mismatch_idx, 0));
    }
  }

  ScopedTempDir dir_;
};

struct DTypePair {
  DType stored;
  DType matmul;
};

class LlamaWeightsDTypeTest : public LlamaWeightsTest,
                              public ::testing::WithParamInterface<DTypePair> {};

TEST_P(LlamaWeightsDTypeTest, EveryWeightHasTheRightDTypeShapeAndValues) {
  TinyModelSpec spec;
  spec.dtype = GetParam().stored;
  absl::StatusOr<std::unique_ptr<LlamaWeights>> weights = WriteAndLoad(spec, GetParam().matmul);
  ASSERT_THAT(weights, IsOk());
  ASSERT_EQ((*weights)->layers.size(), 2u);
  ExpectAllWeights(**weights, spec, GetParam().matmul);
  EXPECT_EQ((*weights)->layers[0].q_bias.data, nullptr);  // Llama has no biases
  EXPECT_EQ((*weights)->layers[0].q_bias.numel(), 0);
  if (spec.dtype == DType::kF32 && GetParam().matmul == DType::kF32) {
    EXPECT_EQ((*weights)->num_owned_bytes, 0u);  // nothing to convert
  } else {
    EXPECT_GT((*weights)->num_owned_bytes, 0u);  // matmul weights or norms were converted
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllPairs, LlamaWeightsDTypeTest,
    ::testing::Values(DTypePair{DType::kF32, DType::kF32}, DTypePair{DType::kF32, DType::kBF16},
                      DTypePair{DType::kF16, DType::kF32}, DTypePair{DType::kF16, DType::kBF16},
                      DTypePair{DType::kBF16, DType::kF32}, DTypePair{DType::kBF16, DType::kBF16}),
    [](const auto& info) {
      return std::string(DTypeName(info.param.stored)) + "_as_" +
             std::string(DTypeName(info.param.matmul));
    });

TEST_F(LlamaWeightsTest, TiedLmHeadAliasesTableWhenDTypesMatch) {
  TinyModelSpec spec;
  spec.tie_word_embeddings = true;
  spec.dtype = DType::kBF16;
  absl::StatusOr<std::unique_ptr<LlamaWeights>> weights = WriteAndLoad(spec, DType::kBF16);
  ASSERT_THAT(weights, IsOk());
  EXPECT_EQ((*weights)->lm_head.data, (*weights)->embed_tokens.data);
  ExpectAllWeights(**weights, spec, DType::kBF16);
}

TEST_F(LlamaWeightsTest, TiedLmHeadIsConvertedWhenTableDTypeDiffers) {
  TinyModelSpec spec;
  spec.tie_word_embeddings = true;
  spec.dtype = DType::kBF16;
  absl::StatusOr<std::unique_ptr<LlamaWeights>> weights = WriteAndLoad(spec, DType::kF32);
  ASSERT_THAT(weights, IsOk());
  EXPECT_EQ((*weights)->embed_tokens.dtype, DType::kBF16);  // kept: the embedding reads bf16
  EXPECT_EQ((*weights)->lm_head.dtype, DType::kF32);
  EXPECT_NE((*weights)->lm_head.data, (*weights)->embed_tokens.data);
  ExpectAllWeights(**weights, spec, DType::kF32);
}

TEST_F(LlamaWeightsTest, Qwen2LoadsQkvBiasesAsF32) {
  TinyModelSpec spec;
  spec.architecture = "Qwen2ForCausalLM";
  spec.dtype = DType::kBF16;
  absl::StatusOr<std::unique_ptr<LlamaWeights>> weights = WriteAndLoad(spec, DType::kBF16);
  ASSERT_THAT(weights, IsOk());
  const LayerWeights& layer = (*weights)->layers[1];
  EXPECT_EQ(layer.q_bias.dtype, DType::kF32);
  EXPECT_EQ(layer.q_bias.shape, std::vector<int64_t>{16});
  EXPECT_EQ(layer.k_bias.shape, std::vector<int64_t>{8});
  EXPECT_EQ(layer.v_bias.shape, std::vector<int64_t>{8});
  ExpectAllWeights(**weights, spec, DType::kBF16);  // includes the bias values
}

TEST_F(LlamaWeightsTest, ShardedCheckpointLoads) {
  TinyModelSpec spec;
  spec.num_shards = 3;
  spec.dtype = DType::kBF16;
  absl::StatusOr<std::unique_ptr<LlamaWeights>> weights = WriteAndLoad(spec, DType::kBF16);
  ASSERT_THAT(weights, IsOk());
  EXPECT_EQ((*weights)->checkpoint->files().size(), 3u);
  ExpectAllWeights(**weights, spec, DType::kBF16);
}

TEST_F(LlamaWeightsTest, MisalignedStoredTensorsAreCopied) {
  TinyModelSpec spec;
  spec.dtype = DType::kF32;
  spec.data_start_remainder = 1;
  absl::StatusOr<std::unique_ptr<LlamaWeights>> weights = WriteAndLoad(spec, DType::kF32);
  ASSERT_THAT(weights, IsOk());
  EXPECT_GT((*weights)->num_owned_bytes, 0u);
  ExpectAllWeights(**weights, spec, DType::kF32);
}

TEST_F(LlamaWeightsTest, LargeConversionsRunOnThePool) {
  TinyModelSpec spec;
  spec.vocab_size = 8192;  // 131072-element table: above the parallel threshold
  spec.dtype = DType::kF16;
  ThreadPool pool(2);
  absl::StatusOr<std::unique_ptr<LlamaWeights>> weights = WriteAndLoad(spec, DType::kBF16, &pool);
  ASSERT_THAT(weights, IsOk());
  ExpectAllWeights(**weights, spec, DType::kBF16);
}

TEST_F(LlamaWeightsTest, MissingTensorIsNotFound) {
  TinyModelSpec spec;
  spec.omit = {"model.layers.1.mlp.up_proj.weight"};
  EXPECT_THAT(
      WriteAndLoad(spec, DType::kF32),
      StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("'model.layers.1.mlp.up_proj.weight'"),
                                                  HasSubstr(dir_.path().string()))));
}

TEST_F(LlamaWeightsTest, UntiedModelWithoutLmHeadIsNotFound) {
  TinyModelSpec spec;
  spec.omit = {"lm_head.weight"};
  EXPECT_THAT(WriteAndLoad(spec, DType::kF32),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("'lm_head.weight'")));
}

TEST_F(LlamaWeightsTest, Qwen2WithoutBiasIsNotFound) {
  TinyModelSpec spec;
  spec.architecture = "Qwen2ForCausalLM";
  spec.omit = {"model.layers.0.self_attn.k_proj.bias"};
  EXPECT_THAT(
      WriteAndLoad(spec, DType::kF32),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("'model.layers.0.self_attn.k_proj.bias'")));
}

TEST_F(LlamaWeightsTest, WrongShapeNamesTensorShapesAndFile) {
  TinyModelSpec spec;
  // A checkpoint written for 4 kv heads, loaded with a config that says 2.
  spec.shape_overrides = {{"model.layers.0.self_attn.k_proj.weight", {16, 16}}};
  EXPECT_THAT(WriteAndLoad(spec, DType::kF32),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'model.layers.0.self_attn.k_proj.weight'"),
                             HasSubstr("has shape [16, 16], expected [8, 16]"),
                             HasSubstr("model.safetensors"))));
}

TEST_F(LlamaWeightsTest, UnsupportedMatmulDTypeIsInvalid) {
  EXPECT_THAT(WriteAndLoad(TinyModelSpec{}, DType::kF16),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("f16")));
}

}  // namespace
}  // namespace baton::runtime
