#include "runtime/model/llama_weights.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/thread_pool.h"
#include "runtime/model/model_config.h"
#include "runtime/model/model_shard.h"
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
                      DTypePair{DType::kF32, DType::kF16}, DTypePair{DType::kF16, DType::kF32},
                      DTypePair{DType::kF16, DType::kBF16}, DTypePair{DType::kF16, DType::kF16},
                      DTypePair{DType::kBF16, DType::kF32}, DTypePair{DType::kBF16, DType::kBF16},
                      DTypePair{DType::kBF16, DType::kF16}),
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

// An f16 checkpoint served in f16: the matmul weights stay in the mapping, the table is widened to
// f32 for the embedding kernel, and the tied lm_head is the checkpoint's f16 table, also mapped.
TEST_F(LlamaWeightsTest, F16CheckpointAsF16KeepsMatmulWeightsAndTiedLmHeadMapped) {
  TinyModelSpec spec;
  spec.tie_word_embeddings = true;
  spec.dtype = DType::kF16;
  absl::StatusOr<std::unique_ptr<LlamaWeights>> weights = WriteAndLoad(spec, DType::kF16);
  ASSERT_THAT(weights, IsOk());
  EXPECT_EQ((*weights)->embed_tokens.dtype, DType::kF32);
  EXPECT_EQ((*weights)->lm_head.dtype, DType::kF16);
  EXPECT_NE((*weights)->lm_head.data, (*weights)->embed_tokens.data);
  ExpectAllWeights(**weights, spec, DType::kF16);  // checks which weights are mapped
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

TEST_F(LlamaWeightsTest, MappedMatmulWeightsOfAMiBOrMoreMoveToHugePages) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    TinyModelSpec spec;
    spec.vocab_size = 16384;  // a [16384, 16] f32 lm_head is 1 MiB: moved; the layers stay mapped
    spec.tie_word_embeddings = tied;
    absl::StatusOr<std::unique_ptr<LlamaWeights>> weights = WriteAndLoad(spec, DType::kF32);
    ASSERT_THAT(weights, IsOk());
    LlamaWeights& w = **weights;
    const size_t total = w.num_mapped_bytes + w.num_owned_bytes;
    const void* q_proj = w.layers[0].q_proj.data;
    const auto* lm_head = static_cast<const std::byte*>(w.lm_head.data);
    const std::vector<std::byte> lm_head_before(lm_head, lm_head + w.lm_head.num_bytes());
    MoveMappedMatmulWeightsToHugePages(w);
    EXPECT_EQ(std::memcmp(w.lm_head.data, lm_head_before.data(), lm_head_before.size()), 0);
    EXPECT_EQ(w.num_mapped_bytes + w.num_owned_bytes, total);
    EXPECT_EQ(w.layers[0].q_proj.data, q_proj);  // under kHugePageMinBytes: left mapped
    if (tied) {
      EXPECT_EQ(w.lm_head.data, w.embed_tokens.data);  // the table is not streamed: not moved
      EXPECT_EQ(w.num_owned_bytes, 0u);
    } else {
      EXPECT_EQ(w.num_owned_bytes, w.lm_head.num_bytes());
      EXPECT_FALSE(w.checkpoint->files()[0].Contains(w.lm_head.data, w.lm_head.num_bytes()));
    }
  }
}

// A checkpoint with 8 query heads over 2 KV heads (so tp 4 replicates KV heads), QKV biases
// (Qwen2), 3 layers (so pp 2 splits them 2 + 1) and a vocabulary of 43 (so a vocab-parallel split
// is uneven: 22 + 21 rows at tp 2, 11 + 11 + 11 + 10 at tp 4).
TinyModelSpec ShardableSpec() {
  TinyModelSpec spec;
  spec.architecture = "Qwen2ForCausalLM";
  spec.vocab_size = 43;
  spec.hidden_size = 32;
  spec.num_heads = 8;
  spec.num_kv_heads = 2;
  spec.intermediate_size = 48;
  spec.num_layers = 3;
  return spec;
}

// Rows [row_begin, row_begin + slice rows) and columns [col_begin, col_begin + slice cols) of
// `whole` ([rows, cols], or [rows] for a vector) equal `slice` element for element.
void ExpectSliceOf(const Weight& slice, const Weight& whole, int64_t row_begin, int64_t col_begin) {
  ASSERT_NE(slice.data, nullptr);
  ASSERT_EQ(slice.shape.size(), whole.shape.size());
  const int64_t rows = slice.shape[0];
  const int64_t cols = slice.shape.size() > 1 ? slice.shape[1] : 1;
  const int64_t whole_cols = whole.shape.size() > 1 ? whole.shape[1] : 1;
  ASSERT_LE(row_begin + rows, whole.shape[0]);
  ASSERT_LE(col_begin + cols, whole_cols);
  int64_t num_mismatches = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      num_mismatches += ElementAsF32(slice, r * cols + c) !=
                        ElementAsF32(whole, (row_begin + r) * whole_cols + col_begin + c);
    }
  }
  EXPECT_EQ(num_mismatches, 0);
}

struct ShardLayout {
  int tp_size;
  int pp_size;
  bool vocab_parallel = true;
};

class LlamaWeightsShardTest : public LlamaWeightsTest,
                              public ::testing::WithParamInterface<ShardLayout> {};

// Every rank of the layout keeps exactly the rows / columns of its heads, KV heads and MLP columns
// of its stage's layers, and the embedding / final norm / lm_head only where its stage needs them;
// its bytes are the exact sums of those slices (for tp <= num_kv_heads, 1/tp of a layer's). When
// vocab-parallel, its rows of the embedding (plus the zero row) and of lm_head, which add up to the
// whole tables over the TP ranks.
TEST_P(LlamaWeightsShardTest, RanksKeepTheirSlicesOfTheWholeModel) {
  const TinyModelSpec spec = ShardableSpec();
  absl::StatusOr<std::unique_ptr<LlamaWeights>> whole = WriteAndLoad(spec, DType::kF32);
  ASSERT_THAT(whole, IsOk());
  absl::StatusOr<ModelConfig> config = LoadModelConfig(dir_.path());
  ASSERT_THAT(config, IsOk());
  const int64_t hidden = config->hidden_size;
  const int64_t hd = config->head_dim;
  const int64_t vocab = config->vocab_size;
  const auto [tp_size, pp_size, vocab_parallel] = GetParam();
  size_t whole_layer_bytes = 0;  // the layers' matmul weights, summed over the TP ranks of stage 0
  int64_t num_embed_rows = 0;    // the embedding rows (without zero rows) over the first stage's
  int64_t num_lm_head_rows = 0;  // TP ranks, and lm_head's over the last stage's
  size_t sum_rank_bytes = 0;     // mapped + owned, over every rank
  for (int rank = 0; rank < tp_size * pp_size; ++rank) {
    SCOPED_TRACE(::testing::Message() << "rank " << rank);
    absl::StatusOr<ShardSpec> spec_of_rank =
        ShardSpecOfRank({.tp_size = tp_size, .pp_size = pp_size, .vocab_parallel = vocab_parallel},
                        rank);
    ASSERT_THAT(spec_of_rank, IsOk());
    absl::StatusOr<ModelShard> shard = MakeModelShard(*config, *spec_of_rank);
    ASSERT_THAT(shard, IsOk());
    absl::StatusOr<std::unique_ptr<LlamaWeights>> part =
        LoadLlamaWeights(dir_.path(), *config, DType::kF32, nullptr, &*shard);
    ASSERT_THAT(part, IsOk());
    const LlamaWeights& w = **part;
    ASSERT_EQ(w.layer_begin, shard->layer_begin);
    ASSERT_EQ(static_cast<int>(w.layers.size()), shard->num_layers());

    const int64_t q_rows = shard->num_heads * hd;
    const int64_t kv_rows = shard->num_kv_heads * hd;
    const int64_t inter = shard->intermediate_size;
    const int64_t q_begin = shard->head_begin * hd;
    const int64_t kv_begin = shard->kv_head_begin * hd;
    const int64_t mlp_begin = spec_of_rank->tp_rank * inter;
    for (int i = 0; i < shard->num_layers(); ++i) {
      SCOPED_TRACE(::testing::Message() << "layer " << shard->layer_begin + i);
      const LayerWeights& got = w.layers[i];
      const LayerWeights& all = (*whole)->layers[shard->layer_begin + i];
      EXPECT_EQ(got.q_proj.shape, (std::vector<int64_t>{q_rows, hidden}));
      EXPECT_EQ(got.k_proj.shape, (std::vector<int64_t>{kv_rows, hidden}));
      EXPECT_EQ(got.o_proj.shape, (std::vector<int64_t>{hidden, q_rows}));
      EXPECT_EQ(got.gate_proj.shape, (std::vector<int64_t>{inter, hidden}));
      EXPECT_EQ(got.down_proj.shape, (std::vector<int64_t>{hidden, inter}));
      ExpectSliceOf(got.input_norm, all.input_norm, 0, 0);
      ExpectSliceOf(got.post_attention_norm, all.post_attention_norm, 0, 0);
      ExpectSliceOf(got.q_proj, all.q_proj, q_begin, 0);
      ExpectSliceOf(got.k_proj, all.k_proj, kv_begin, 0);
      ExpectSliceOf(got.v_proj, all.v_proj, kv_begin, 0);
      ExpectSliceOf(got.q_bias, all.q_bias, q_begin, 0);
      ExpectSliceOf(got.k_bias, all.k_bias, kv_begin, 0);
      ExpectSliceOf(got.v_bias, all.v_bias, kv_begin, 0);
      ExpectSliceOf(got.o_proj, all.o_proj, 0, q_begin);
      ExpectSliceOf(got.gate_proj, all.gate_proj, mlp_begin, 0);
      ExpectSliceOf(got.up_proj, all.up_proj, mlp_begin, 0);
      ExpectSliceOf(got.down_proj, all.down_proj, 0, mlp_begin);
      // Row slices stay in the mapping; column slices are copies.
      const auto& file = w.checkpoint->files().front();
      EXPECT_TRUE(file.Contains(got.q_proj.data, got.q_proj.num_bytes()));
      EXPECT_TRUE(file.Contains(got.gate_proj.data, got.gate_proj.num_bytes()));
      EXPECT_EQ(file.Contains(got.o_proj.data, got.o_proj.num_bytes()), tp_size == 1);
    }
    const bool first = spec_of_rank->pp_rank == 0;
    const bool last = spec_of_rank->pp_rank == pp_size - 1;
    EXPECT_EQ(w.embed_tokens.data != nullptr, first);
    EXPECT_EQ(w.lm_head.data != nullptr, last);
    EXPECT_EQ(w.final_norm.data != nullptr, last);
    const bool split = vocab_parallel && tp_size > 1;
    EXPECT_EQ(shard->vocab_parallel, split);
    const int64_t rows = shard->num_vocab_rows();
    EXPECT_EQ(rows, split ? vocab / tp_size + (spec_of_rank->tp_rank < vocab % tp_size) : vocab);
    const auto& file = w.checkpoint->files().front();
    if (first) {
      // The rank's rows, then (when split) one zero row for the other ranks' ids.
      EXPECT_EQ(w.embed_tokens.shape, (std::vector<int64_t>{rows + split, hidden}));
      Weight table_rows = w.embed_tokens;
      table_rows.shape[0] = rows;
      ExpectSliceOf(table_rows, (*whole)->embed_tokens, shard->vocab_begin, 0);
      for (int64_t i = rows * hidden; i < (rows + split) * hidden; ++i) {
        EXPECT_EQ(ElementAsF32(w.embed_tokens, i), 0.0f) << "zero row element " << i;
      }
      num_embed_rows += rows;
    }
    if (last) {
      EXPECT_EQ(w.lm_head.shape, (std::vector<int64_t>{rows, hidden}));
      ExpectSliceOf(w.lm_head, (*whole)->lm_head, shard->vocab_begin, 0);
      EXPECT_TRUE(file.Contains(w.lm_head.data, w.lm_head.num_bytes()));  // a row slice: mapped
      num_lm_head_rows += rows;
    }

    // Bytes (f32 stored, f32 kept): the column slices of o/down are owned when tp > 1, and so is
    // a split embedding; the rest is mapped.
    const size_t f = sizeof(float);
    const size_t layers = shard->num_layers();
    const size_t row_sliced = ((q_rows + 2 * kv_rows) * hidden + 2 * inter * hidden) * f;
    const size_t column_sliced = (hidden * q_rows + hidden * inter) * f;
    const size_t small = (2 * hidden + q_rows + 2 * kv_rows) * f;  // norms and biases
    const size_t embed_bytes = first ? (rows + split) * hidden * f : 0;
    const size_t ends = embed_bytes + (last ? (rows + 1) * hidden * f : 0);
    const size_t owned = (tp_size > 1 ? layers * column_sliced : 0) + (split ? embed_bytes : 0);
    EXPECT_EQ(w.num_owned_bytes, owned);
    EXPECT_EQ(w.num_mapped_bytes + w.num_owned_bytes,
              layers * (row_sliced + column_sliced + small) + ends);
    if (spec_of_rank->pp_rank == 0) whole_layer_bytes += row_sliced + column_sliced;
    sum_rank_bytes += w.num_mapped_bytes + w.num_owned_bytes;
  }
  // Over the TP ranks of a stage the layer weights add up to the whole model's, plus the
  // replicated KV heads when tp > num_kv_heads.
  const size_t whole_layer = ((8 + 2 * 2) * 4 * 32 + 2 * 48 * 32 + 32 * 8 * 4 + 32 * 48) * 4;
  const size_t replicated_kv = tp_size > 2 ? (tp_size - 2) * 2 * 4 * 32 * 4 : 0;
  EXPECT_EQ(whole_layer_bytes, whole_layer + replicated_kv);
  // The tables: split, the TP ranks' rows tile the vocabulary once; replicated, each holds all.
  const int64_t copies = vocab_parallel ? 1 : tp_size;
  EXPECT_EQ(num_embed_rows, copies * vocab);
  EXPECT_EQ(num_lm_head_rows, copies * vocab);
  // Over all ranks, the bytes are the whole model's plus what is replicated on purpose: the
  // norms (tp - 1 more copies of each layer's two and the final one), the KV heads beyond
  // num_kv_heads (k, v and their biases), and either the zero rows of a split embedding (one per
  // first-stage rank) or tp - 1 more copies of both tables.
  const size_t f = sizeof(float);
  const size_t whole_bytes = (*whole)->num_mapped_bytes + (*whole)->num_owned_bytes;
  const size_t extra_norms = (tp_size - 1) * (3 * 2 * hidden + hidden) * f;
  const size_t extra_kv = tp_size > 2 ? 3 * (tp_size - 2) * 2 * (hd * hidden + hd) * f : 0;
  const size_t extra_tables = vocab_parallel ? (tp_size > 1 ? tp_size * hidden * f : 0)
                                             : (tp_size - 1) * 2 * vocab * hidden * f;
  EXPECT_EQ(sum_rank_bytes, whole_bytes + extra_norms + extra_kv + extra_tables);
}

INSTANTIATE_TEST_SUITE_P(Layouts, LlamaWeightsShardTest,
                         ::testing::Values(ShardLayout{1, 1}, ShardLayout{2, 1}, ShardLayout{4, 1},
                                           ShardLayout{1, 2}, ShardLayout{1, 3},
                                           ShardLayout{2, 2}, ShardLayout{2, 1, false},
                                           ShardLayout{4, 1, false}, ShardLayout{2, 2, false}),
                         [](const auto& info) {
                           return "tp" + std::to_string(info.param.tp_size) + "_pp" +
                                  std::to_string(info.param.pp_size) +
                                  (info.param.vocab_parallel ? "" : "_replicated_vocab");
                         });

// Tied embeddings, vocab-parallel: on a one-stage rank lm_head is the first rows of the rank's
// table (which ends with the zero row); on the last of two stages it is a zero-copy row slice of
// the stored table.
TEST_F(LlamaWeightsTest, TiedVocabParallelLmHeadIsTheRanksTableSlice) {
  TinyModelSpec spec = ShardableSpec();
  spec.tie_word_embeddings = true;
  spec.dtype = DType::kBF16;
  ASSERT_THAT(WriteTinyModel(dir_.path(), spec), IsOk());
  absl::StatusOr<ModelConfig> config = LoadModelConfig(dir_.path());
  ASSERT_THAT(config, IsOk());
  for (int pp_size : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << "pp " << pp_size);
    absl::StatusOr<ModelShard> shard = MakeModelShard(
        *config, ShardSpec{.tp_rank = 1, .tp_size = 2, .pp_rank = pp_size - 1, .pp_size = pp_size});
    ASSERT_THAT(shard, IsOk());
    absl::StatusOr<std::unique_ptr<LlamaWeights>> part =
        LoadLlamaWeights(dir_.path(), *config, DType::kBF16, nullptr, &*shard);
    ASSERT_THAT(part, IsOk());
    const LlamaWeights& w = **part;
    EXPECT_EQ(w.lm_head.shape, (std::vector<int64_t>{21, 32}));  // rows [22, 43)
    const auto& file = w.checkpoint->files().front();
    if (pp_size == 1) {
      EXPECT_EQ(w.embed_tokens.shape, (std::vector<int64_t>{22, 32}));
      EXPECT_EQ(w.lm_head.data, w.embed_tokens.data);
    } else {
      EXPECT_EQ(w.embed_tokens.data, nullptr);
      EXPECT_TRUE(file.Contains(w.lm_head.data, w.lm_head.num_bytes()));
    }
  }
}

TEST_F(LlamaWeightsTest, Bf16RowSlicesAreZeroCopyAndColumnSlicesOwned) {
  TinyModelSpec spec = ShardableSpec();
  spec.dtype = DType::kBF16;
  ASSERT_THAT(WriteTinyModel(dir_.path(), spec), IsOk());
  absl::StatusOr<ModelConfig> config = LoadModelConfig(dir_.path());
  ASSERT_THAT(config, IsOk());
  absl::StatusOr<ModelShard> shard = MakeModelShard(*config, ShardSpec{.tp_rank = 1, .tp_size = 2});
  ASSERT_THAT(shard, IsOk());
  absl::StatusOr<std::unique_ptr<LlamaWeights>> part =
      LoadLlamaWeights(dir_.path(), *config, DType::kBF16, nullptr, &*shard);
  ASSERT_THAT(part, IsOk());
  // Owned: the o/down column slices (bf16), the norms and biases widened to f32, and the
  // embedding's rows [22, 43) with the zero row (bf16).
  const size_t per_layer = (32 * 16 + 32 * 24) * 2 + (2 * 32 + 16 + 2 * 4) * 4;
  EXPECT_EQ((*part)->num_owned_bytes, 3 * per_layer + 32 * 4 + 22 * 32 * 2);  // + the final norm
  const auto& file = (*part)->checkpoint->files().front();
  EXPECT_TRUE(file.Contains((*part)->layers[2].v_proj.data, (*part)->layers[2].v_proj.num_bytes()));
  EXPECT_FALSE(
      file.Contains((*part)->layers[2].down_proj.data, (*part)->layers[2].down_proj.num_bytes()));
  EXPECT_TRUE(file.Contains((*part)->lm_head.data, (*part)->lm_head.num_bytes()));
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
  EXPECT_THAT(WriteAndLoad(TinyModelSpec{}, static_cast<DType>(7)),  // no such dtype
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("matmul dtype must be f32, bf16, f16, i8, i4 or fp8")));
}

// int8 at load: every matmul weight (lm_head too, a copy of a tied table) is q * scale with one
// scale per row, scale = max |w| / 127 and q = w / scale rounded half to even; the embedding table
// and the norms are as without quantization.
TEST_F(LlamaWeightsTest, Int8QuantizesEveryMatmulWeightPerRow) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(::testing::Message() << "tied " << tied);
    TinyModelSpec spec;
    spec.tie_word_embeddings = tied;
    spec.dtype = DType::kBF16;
    absl::StatusOr<std::unique_ptr<LlamaWeights>> weights = WriteAndLoad(spec, DType::kI8);
    ASSERT_THAT(weights, IsOk());
    EXPECT_EQ((*weights)->embed_tokens.dtype, DType::kBF16);
    EXPECT_EQ((*weights)->embed_tokens.scales, nullptr);
    std::map<std::string, std::vector<int64_t>> shapes;
    for (const auto& [name, shape] : TinyTensorShapes(spec)) shapes[name] = shape;
    for (const auto& [name, weight] : NamedWeights(**weights, tied)) {
      SCOPED_TRACE(name);
      const bool is_lm_head = weight == &(*weights)->lm_head;
      if (IsNorm(name) || (name == "model.embed_tokens.weight" && !is_lm_head)) {
        EXPECT_NE(weight->dtype, DType::kI8);
        continue;
      }
      ASSERT_EQ(weight->dtype, DType::kI8);
      ASSERT_EQ(weight->shape, shapes.at(name));
      ASSERT_NE(weight->scales, nullptr);
      const int64_t rows = weight->shape[0], cols = weight->shape[1];
      const auto* q = static_cast<const int8_t*>(weight->data);
      for (int64_t r = 0; r < rows; ++r) {
        double max_abs = 0;
        for (int64_t c = 0; c < cols; ++c) {
          max_abs = std::max(max_abs, std::fabs(double{TinyValue(name, r * cols + c)}));
        }
        const float scale = static_cast<float>(max_abs / 127);
        ASSERT_FLOAT_EQ(weight->scales[r], scale) << "row " << r;
        for (int64_t c = 0; c < cols; ++c) {
          const float w = TinyValue(name, r * cols + c);
          ASSERT_EQ(q[r * cols + c], static_cast<int8_t>(std::nearbyint(w / weight->scales[r])))
              << "row " << r << " column " << c;
          // Dequantized, within half a step of the checkpoint's value.
          ASSERT_LE(std::fabs(q[r * cols + c] * weight->scales[r] - w), weight->scales[r] / 2 + 1e-6);
        }
      }
    }
  }
}

// A TP rank quantizes its own slice: the rows of its heads (row-parallel q/k/v keep the whole
// rows' scales) and, for o_proj / down_proj, the columns of its heads, each row's scale taken over
// those columns alone.
TEST_F(LlamaWeightsTest, Int8TpRankQuantizesItsSlices) {
  TinyModelSpec spec;
  spec.dtype = DType::kF32;
  ASSERT_THAT(WriteTinyModel(dir_.path(), spec), IsOk());
  absl::StatusOr<ModelConfig> config = LoadModelConfig(dir_.path());
  ASSERT_THAT(config, IsOk());
  absl::StatusOr<ModelShard> shard = MakeModelShard(*config, ShardSpec{.tp_rank = 1, .tp_size = 2});
  ASSERT_THAT(shard, IsOk());
  absl::StatusOr<std::unique_ptr<LlamaWeights>> part =
      LoadLlamaWeights(dir_.path(), *config, DType::kI8, nullptr, &*shard);
  ASSERT_THAT(part, IsOk());
  const Weight& o_proj = (*part)->layers[0].o_proj;
  ASSERT_EQ(o_proj.dtype, DType::kI8);
  const int64_t hidden = config->hidden_size;
  const int64_t full_cols = int64_t{config->num_heads} * config->head_dim;
  const int64_t width = o_proj.shape[1];
  ASSERT_EQ(width * 2, full_cols);
  const int64_t begin = int64_t{shard->head_begin} * config->head_dim;
  for (int64_t r = 0; r < hidden; ++r) {
    float max_abs = 0;
    for (int64_t c = 0; c < width; ++c) {
      max_abs = std::max(max_abs, std::fabs(TinyValue("model.layers.0.self_attn.o_proj.weight",
                                                      r * full_cols + begin + c)));
    }
    EXPECT_FLOAT_EQ(o_proj.scales[r], max_abs / 127) << "row " << r;
  }
}

// A compressed-tensors checkpoint (checkpoint_quantization.h), written as llm-compressor lays it
// out: every Linear but lm_head quantized per channel, int8 (`weight`) or packed 4 to an I32 word
// (`weight_packed`, q + 128, low byte first), scales [out, 1] in bf16. The loader's integers and
// scales are the stored ones, lm_head and the embedding stay as stored, whatever weight dtype is
// asked for; a TP rank takes its rows and columns of them.
TEST_F(LlamaWeightsTest, CompressedTensorsInt8CheckpointLoadsAsStored) {
  for (const std::string format : {"int-quantized", "pack-quantized"}) {
    SCOPED_TRACE(format);
    TinyModelSpec spec;
    spec.dtype = DType::kBF16;
    ASSERT_THAT(WriteTinyModel(dir_.path(), spec), IsOk());
    nlohmann::json config_json = testing::TinyConfigJson(spec);
    config_json["quantization_config"] = {
        {"quant_method", "compressed-tensors"}, {"format", format},
        {"quantization_status", "compressed"}, {"ignore", {"lm_head"}},
        {"config_groups",
         {{"group_0",
           {{"targets", {"Linear"}},
            {"weights",
             {{"num_bits", 8}, {"type", "int"}, {"symmetric", true}, {"strategy", "channel"}}}}}}}};
    std::ofstream(dir_.path() / "config.json") << config_json.dump();
    // The integers of row r, column c of a module, and the rows' scales.
    auto q_of = [](const std::string& module, int64_t r, int64_t c) {
      return static_cast<int8_t>((static_cast<int64_t>(module.size()) * 31 + r * 7 + c * 13) % 255 - 127);
    };
    auto scale_of = [](int64_t r) { return 0.015625f * static_cast<float>(r % 5 + 1); };
    testing::SafetensorsWriter writer;
    for (const auto& [name, shape] : TinyTensorShapes(spec)) {
      const bool linear = name.ends_with("_proj.weight");
      std::vector<float> values(static_cast<size_t>(NumElements(shape)));
      if (!linear) {
        for (size_t i = 0; i < values.size(); ++i) values[i] = TinyValue(name, i);
        writer.Add(name, DType::kBF16, shape, values);
        continue;
      }
      const std::string module = name.substr(0, name.size() - std::string(".weight").size());
      const int64_t rows = shape[0], cols = shape[1];
      std::vector<float> scales(rows);
      for (int64_t r = 0; r < rows; ++r) scales[r] = scale_of(r);
      writer.Add(module + ".weight_scale", DType::kBF16, {rows, 1}, scales);
      if (format == "int-quantized") {
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t c = 0; c < cols; ++c) values[r * cols + c] = q_of(module, r, c);
        }
        writer.Add(module + ".weight", DType::kI8, shape, values);
      } else {
        const int64_t words = (cols + 3) / 4;
        std::string bytes(static_cast<size_t>(rows * words * 4), '\0');
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t c = 0; c < cols; ++c) {
            bytes[r * words * 4 + c] = static_cast<char>(static_cast<uint8_t>(q_of(module, r, c) + 128));
          }
        }
        writer.AddRaw(module + ".weight_packed", "I32", {rows, words}, bytes);
      }
    }
    ASSERT_THAT(writer.Write(dir_.path() / "model.safetensors"), IsOk());
    absl::StatusOr<ModelConfig> config = LoadModelConfig(dir_.path());
    ASSERT_THAT(config, IsOk());
    ASSERT_TRUE(config->quantization.has_value());
    for (DType asked : {DType::kBF16, DType::kI8}) {
      absl::StatusOr<std::unique_ptr<LlamaWeights>> weights =
          LoadLlamaWeights(dir_.path(), *config, asked);
      ASSERT_THAT(weights, IsOk());
      EXPECT_EQ((*weights)->embed_tokens.dtype, DType::kBF16);
      // lm_head is in `ignore`: as stored (bf16) when i8 is asked for, as asked otherwise.
      EXPECT_EQ((*weights)->lm_head.dtype, DType::kBF16);
      const Weight& down = (*weights)->layers[1].down_proj;
      ASSERT_EQ(down.dtype, DType::kI8);
      const std::string module = "model.layers.1.mlp.down_proj";
      const auto* q = static_cast<const int8_t*>(down.data);
      for (int64_t r = 0; r < down.shape[0]; ++r) {
        ASSERT_EQ(down.scales[r], scale_of(r));
        for (int64_t c = 0; c < down.shape[1]; ++c) {
          ASSERT_EQ(q[r * down.shape[1] + c], q_of(module, r, c)) << r << ", " << c;
        }
      }
    }
    // A TP rank's o_proj: its columns of every row, the rows' scales.
    absl::StatusOr<ModelShard> shard =
        MakeModelShard(*config, ShardSpec{.tp_rank = 1, .tp_size = 2});
    ASSERT_THAT(shard, IsOk());
    absl::StatusOr<std::unique_ptr<LlamaWeights>> part =
        LoadLlamaWeights(dir_.path(), *config, DType::kI8, nullptr, &*shard);
    ASSERT_THAT(part, IsOk());
    const Weight& o_proj = (*part)->layers[0].o_proj;
    const int64_t begin = int64_t{shard->head_begin} * config->head_dim;
    const auto* q = static_cast<const int8_t*>(o_proj.data);
    for (int64_t r = 0; r < o_proj.shape[0]; ++r) {
      ASSERT_EQ(o_proj.scales[r], scale_of(r));
      for (int64_t c = 0; c < o_proj.shape[1]; ++c) {
        ASSERT_EQ(q[r * o_proj.shape[1] + c], q_of("model.layers.0.self_attn.o_proj", r, begin + c));
      }
    }
  }
}

// fp8 at load: every matmul weight (lm_head too) per row, scale = max |w| / 448, each code the
// nearest E4M3 of w / scale.
TEST_F(LlamaWeightsTest, Fp8QuantizesEveryMatmulWeightPerRow) {
  TinyModelSpec spec;
  spec.dtype = DType::kBF16;
  absl::StatusOr<std::unique_ptr<LlamaWeights>> weights = WriteAndLoad(spec, DType::kF8E4M3);
  ASSERT_THAT(weights, IsOk());
  EXPECT_EQ((*weights)->embed_tokens.dtype, DType::kBF16);
  for (const auto& [name, weight] : NamedWeights(**weights, false)) {
    SCOPED_TRACE(name);
    if (IsNorm(name) || name == "model.embed_tokens.weight") continue;
    ASSERT_EQ(weight->dtype, DType::kF8E4M3);
    ASSERT_NE(weight->scales, nullptr);
    ASSERT_EQ(weight->group_size, 0);
    ASSERT_EQ(weight->num_scales(), weight->shape[0]);
    const int64_t rows = weight->shape[0], cols = weight->shape[1];
    const auto* q = static_cast<const uint8_t*>(weight->data);
    for (int64_t r = 0; r < rows; ++r) {
      float max_abs = 0;
      for (int64_t c = 0; c < cols; ++c) {
        max_abs = std::max(max_abs, std::fabs(Bf16ToF32(F32ToBf16(TinyValue(name, r * cols + c)))));
      }
      ASSERT_EQ(weight->scales[r], max_abs / 448) << "row " << r;
      for (int64_t c = 0; c < cols; ++c) {
        const float w = Bf16ToF32(F32ToBf16(TinyValue(name, r * cols + c)));
        ASSERT_EQ(q[r * cols + c], F32ToFp8E4M3(w / weight->scales[r])) << r << ", " << c;
      }
    }
  }
}

// fp8 checkpoints as their writers lay them out (checkpoint_quantization.h): `weight` F8_E4M3 with
// a compressed-tensors per-channel `weight_scale` [out, 1] (bf16), the fp8 method's per-tensor
// `weight_scale` (a scalar), or its 128 x 128-style blocks, `weight_scale_inv` [ceil(out / 16),
// ceil(in / 32)] here. Every weight reads back as code * its scale, exactly; a TP rank's o_proj
// takes its columns and their blocks' scales.
TEST_F(LlamaWeightsTest, Fp8CheckpointsLoadAsStored) {
  enum class Form { kChannel, kTensor, kBlock };
  for (Form form : {Form::kChannel, Form::kTensor, Form::kBlock}) {
    SCOPED_TRACE(static_cast<int>(form));
    TinyModelSpec spec;
    spec.hidden_size = 64;
    spec.num_heads = 4;  // head_dim 16: a TP rank's o_proj slice is 32 columns, one block
    spec.intermediate_size = 128;  // a TP rank's down_proj slice: 64 columns, two blocks
    spec.dtype = DType::kBF16;
    ASSERT_THAT(WriteTinyModel(dir_.path(), spec), IsOk());
    nlohmann::json config_json = testing::TinyConfigJson(spec);
    if (form == Form::kChannel) {
      config_json["quantization_config"] = {
          {"quant_method", "compressed-tensors"}, {"format", "float-quantized"},
          {"quantization_status", "compressed"}, {"ignore", {"lm_head"}},
          {"config_groups",
           {{"group_0",
             {{"targets", {"Linear"}},
              {"weights",
               {{"num_bits", 8}, {"type", "float"}, {"symmetric", true},
                {"strategy", "channel"}}}}}}}};
    } else {
      config_json["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"},
                                            {"activation_scheme", "dynamic"}};
      if (form == Form::kBlock) {
        config_json["quantization_config"]["weight_block_size"] = {16, 32};
      }
    }
    std::ofstream(dir_.path() / "config.json") << config_json.dump();
    // The code of row r, column c of a module (never a NaN code), and the scales.
    auto code_of = [](const std::string& module, int64_t r, int64_t c) {
      const auto code = static_cast<uint8_t>((static_cast<int64_t>(module.size()) * 31 + r * 7 + c * 13) % 256);
      return (code & 0x7F) == 0x7F ? static_cast<uint8_t>(0x3F) : code;
    };
    auto scale_of = [](int64_t i) { return 0.0078125f * static_cast<float>(i % 5 + 1); };
    testing::SafetensorsWriter writer;
    for (const auto& [name, shape] : TinyTensorShapes(spec)) {
      std::vector<float> values(static_cast<size_t>(NumElements(shape)));
      if (!name.ends_with("_proj.weight")) {
        for (size_t i = 0; i < values.size(); ++i) values[i] = TinyValue(name, i);
        writer.Add(name, DType::kBF16, shape, values);
        continue;
      }
      const std::string module = name.substr(0, name.size() - std::string(".weight").size());
      const int64_t rows = shape[0], cols = shape[1];
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) values[r * cols + c] = Fp8E4M3ToF32(code_of(module, r, c));
      }
      writer.Add(name, DType::kF8E4M3, shape, values);
      if (form == Form::kChannel) {
        std::vector<float> scales(rows);
        for (int64_t r = 0; r < rows; ++r) scales[r] = scale_of(r);
        writer.Add(module + ".weight_scale", DType::kBF16, {rows, 1}, scales);
      } else if (form == Form::kTensor) {
        writer.Add(module + ".weight_scale", DType::kF32, {}, std::vector<float>{scale_of(3)});
      } else {
        const int64_t br = (rows + 15) / 16, bc = (cols + 31) / 32;
        std::vector<float> scales(br * bc);
        for (int64_t i = 0; i < br * bc; ++i) scales[i] = scale_of(i);
        writer.Add(module + ".weight_scale_inv", DType::kF32, {br, bc}, scales);
      }
    }
    ASSERT_THAT(writer.Write(dir_.path() / "model.safetensors"), IsOk());
    absl::StatusOr<ModelConfig> config = LoadModelConfig(dir_.path());
    ASSERT_THAT(config, IsOk());
    ASSERT_TRUE(config->quantization.has_value());
    // The scale of weight (r, c) of a [rows, cols] module, as stored.
    auto stored_scale = [&](int64_t r, int64_t c, int64_t cols) {
      if (form == Form::kChannel) return scale_of(r);
      if (form == Form::kTensor) return scale_of(3);
      return scale_of(r / 16 * ((cols + 31) / 32) + c / 32);
    };
    auto value_of = [](const Weight& w, int64_t r, int64_t c) {
      const int64_t cols = w.shape[1];
      const float scale = w.group_size > 0 ? w.scales[r * (cols / w.group_size) + c / w.group_size]
                                           : w.scales[r];
      return scale * Fp8E4M3ToF32(static_cast<const uint8_t*>(w.data)[r * cols + c]);
    };
    absl::StatusOr<std::unique_ptr<LlamaWeights>> weights =
        LoadLlamaWeights(dir_.path(), *config, DType::kF8E4M3);
    ASSERT_THAT(weights, IsOk());
    EXPECT_EQ((*weights)->lm_head.dtype, DType::kBF16);  // left unquantized by the checkpoint
    const Weight& down = (*weights)->layers[1].down_proj;
    ASSERT_EQ(down.dtype, DType::kF8E4M3);
    EXPECT_EQ(down.group_size, form == Form::kBlock ? 32 : 0);
    for (int64_t r = 0; r < down.shape[0]; ++r) {
      for (int64_t c = 0; c < down.shape[1]; ++c) {
        ASSERT_EQ(value_of(down, r, c),
                  stored_scale(r, c, 128) * Fp8E4M3ToF32(code_of("model.layers.1.mlp.down_proj", r, c)))
            << r << ", " << c;
      }
    }
    absl::StatusOr<ModelShard> shard =
        MakeModelShard(*config, ShardSpec{.tp_rank = 1, .tp_size = 2});
    ASSERT_THAT(shard, IsOk());
    absl::StatusOr<std::unique_ptr<LlamaWeights>> part =
        LoadLlamaWeights(dir_.path(), *config, DType::kF8E4M3, nullptr, &*shard);
    ASSERT_THAT(part, IsOk());
    const Weight& o_proj = (*part)->layers[0].o_proj;
    const int64_t begin = int64_t{shard->head_begin} * config->head_dim;
    ASSERT_EQ(o_proj.shape[1], 32);
    for (int64_t r = 0; r < o_proj.shape[0]; ++r) {
      for (int64_t c = 0; c < o_proj.shape[1]; ++c) {
        ASSERT_EQ(value_of(o_proj, r, c),
                  stored_scale(r, begin + c, 64) *
                      Fp8E4M3ToF32(code_of("model.layers.0.self_attn.o_proj", r, begin + c)));
      }
    }
  }
}

// What an fp8 checkpoint cannot be read as is refused naming the tensor: a NaN code, a weight
// stored in another dtype than the config says, a scale of no scheme's shape, and blocks that a TP
// rank's slice of the row cuts (or the kernels cannot read: not a multiple of 32 columns).
TEST_F(LlamaWeightsTest, Fp8CheckpointsThatCannotBeReadAreRefusedByName) {
  TinyModelSpec spec;
  spec.hidden_size = 64;
  spec.intermediate_size = 64;
  ASSERT_THAT(WriteTinyModel(dir_.path(), spec), IsOk());
  // Writes every Linear as fp8 ones with a scale tensor of `scale_shape` named `scale_name`,
  // `change` editing each (name, dtype, values) first.
  auto write = [&](const nlohmann::json& quantization, const std::string& scale_name,
                   std::vector<int64_t> scale_shape,
                   std::function<void(const std::string&, DType&, std::vector<float>&)> change) {
    nlohmann::json config_json = testing::TinyConfigJson(spec);
    config_json["quantization_config"] = quantization;
    std::ofstream(dir_.path() / "config.json") << config_json.dump();
    testing::SafetensorsWriter writer;
    for (const auto& [name, shape] : TinyTensorShapes(spec)) {
      std::vector<float> values(static_cast<size_t>(NumElements(shape)), 1.0f);
      if (!name.ends_with("_proj.weight")) {
        writer.Add(name, DType::kF32, shape, values);
        continue;
      }
      DType dtype = DType::kF8E4M3;
      change(name, dtype, values);
      writer.Add(name, dtype, shape, values);
      writer.Add(name.substr(0, name.size() - 7) + "." + scale_name, DType::kF32, scale_shape,
                 std::vector<float>(static_cast<size_t>(NumElements(scale_shape)), 0.5f));
    }
    ASSERT_THAT(writer.Write(dir_.path() / "model.safetensors"), IsOk());
  };
  auto load = [&](const ShardSpec& shard_spec) -> absl::Status {
    absl::StatusOr<ModelConfig> config = LoadModelConfig(dir_.path());
    if (!config.ok()) return config.status();
    absl::StatusOr<ModelShard> shard = MakeModelShard(*config, shard_spec);
    if (!shard.ok()) return shard.status();
    return LoadLlamaWeights(dir_.path(), *config, DType::kF8E4M3, nullptr, &*shard).status();
  };
  const nlohmann::json per_tensor = {{"quant_method", "fp8"}};
  auto unchanged = [](const std::string&, DType&, std::vector<float>&) {};

  write(per_tensor, "weight_scale", {1}, [](const std::string& name, DType&, std::vector<float>& v) {
    if (name == "model.layers.0.self_attn.q_proj.weight") v[5] = NAN;
  });
  EXPECT_THAT(load({}), StatusIs(absl::StatusCode::kInvalidArgument,
                                 AllOf(HasSubstr("q_proj.weight holds a NaN"), HasSubstr("[0, 5]"))));

  write(per_tensor, "weight_scale", {1}, [](const std::string& name, DType& dtype, std::vector<float>&) {
    if (name == "model.layers.1.mlp.up_proj.weight") dtype = DType::kBF16;
  });
  EXPECT_THAT(load({}), StatusIs(absl::StatusCode::kInvalidArgument,
                                 AllOf(HasSubstr("up_proj.weight is bf16"), HasSubstr("says fp8"))));

  write(per_tensor, "weight_scale", {2, 2}, unchanged);
  EXPECT_THAT(load({}), StatusIs(absl::StatusCode::kInvalidArgument,
                                 AllOf(HasSubstr("q_proj.weight_scale must be a float tensor"),
                                       HasSubstr("it is f32 [2, 2]"))));

  // Blocks of 64 columns: whole rows read, but a TP rank's 32-column slice of o_proj cuts them.
  const nlohmann::json blocks = {{"quant_method", "fp8"}, {"weight_block_size", {64, 64}}};
  write(blocks, "weight_scale_inv", {1, 1}, unchanged);
  EXPECT_THAT(load({}), IsOk());
  EXPECT_THAT(load({.tp_rank = 1, .tp_size = 2}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("o_proj: fp8 blocks of 64 columns"),
                             HasSubstr("32 from column 32"))));
}

// Weight (r, c) of a kI4 Weight, dequantized: scale * (nibble - zero) (MatmulParams' layout).
float Int4Value(const Weight& w, int64_t r, int64_t c) {
  const int64_t cols = w.shape[1];
  const auto* bytes = static_cast<const uint8_t*>(w.data);
  const uint8_t byte = bytes[r * (cols / 2) + c / 32 * 16 + c % 16];
  const int u = c % 32 < 16 ? byte & 0xF : byte >> 4;
  const int64_t g = r * (cols / w.group_size) + c / w.group_size;
  return w.scales[g] * (static_cast<float>(u) - (w.zeros != nullptr ? w.zeros[g] : 8.0f));
}

// int4 at load: every layer's matmul weight in groups (128 columns, or the largest of 64 and 32
// that divides the row), each dequantized value within half a step of the checkpoint's; lm_head at
// int8, and a weight whose rows are no multiple of 32 (down_proj of 80 columns here) at int8.
TEST_F(LlamaWeightsTest, Int4QuantizesTheLayersInGroups) {
  TinyModelSpec spec;
  spec.hidden_size = 64;
  spec.intermediate_size = 80;
  spec.dtype = DType::kBF16;
  absl::StatusOr<std::unique_ptr<LlamaWeights>> weights = WriteAndLoad(spec, DType::kI4);
  ASSERT_THAT(weights, IsOk());
  EXPECT_EQ((*weights)->lm_head.dtype, DType::kI8);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& [name, shape] : TinyTensorShapes(spec)) shapes[name] = shape;
  for (const auto& [name, weight] : NamedWeights(**weights, false)) {
    SCOPED_TRACE(name);
    if (IsNorm(name) || name.starts_with("model.embed_tokens") || name == "lm_head.weight") continue;
    ASSERT_EQ(weight->shape, shapes.at(name));
    const int64_t rows = weight->shape[0], cols = weight->shape[1];
    if (cols == 80) {
      EXPECT_EQ(weight->dtype, DType::kI8);
      continue;
    }
    ASSERT_EQ(weight->dtype, DType::kI4);
    EXPECT_EQ(weight->group_size, 64);
    EXPECT_EQ(weight->num_bytes(), static_cast<size_t>(rows * cols / 2));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const float scale = weight->scales[r * (cols / weight->group_size) + c / weight->group_size];
        ASSERT_LE(std::fabs(Int4Value(*weight, r, c) - TinyValue(name, r * cols + c)),
                  scale / 2 + 1e-6)
            << r << ", " << c;
      }
    }
  }
}

// The int4 checkpoint formats (checkpoint_quantization.h), each written here from its own
// documentation of the packing: every Linear quantized in groups of 32 with stored nibbles u,
// zero points z and scales s chosen per (row, column, group), lm_head left in bf16. The loader
// must give back s * (u - z) for every weight, whole and on a TP rank (its heads' columns).
TEST_F(LlamaWeightsTest, Int4CheckpointFormatsLoadAsStored) {
  struct Format {
    std::string name;
    nlohmann::json config;
  };
  const Format formats[] = {
      {"compressed-tensors",
       {{"quant_method", "compressed-tensors"}, {"format", "pack-quantized"},
        {"quantization_status", "compressed"}, {"ignore", {"lm_head"}},
        {"config_groups",
         {{"group_0",
           {{"targets", {"Linear"}},
            {"weights",
             {{"num_bits", 4}, {"type", "int"}, {"symmetric", true}, {"strategy", "group"},
              {"group_size", 32}}}}}}}}},
      {"awq",
       {{"quant_method", "awq"}, {"bits", 4}, {"group_size", 32}, {"zero_point", true},
        {"version", "gemm"}}},
      {"gptq",
       {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 32}, {"desc_act", false},
        {"sym", false}}},
      {"gptq_v2",
       {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 32}, {"desc_act", false},
        {"sym", false}, {"checkpoint_format", "gptq_v2"}}},
  };
  constexpr int kGroup = 32;
  auto u_of = [](const std::string& module, int64_t r, int64_t c) {
    return static_cast<uint32_t>((module.size() * 3 + r * 5 + c * 7 + r * c) % 16);
  };
  // 1 to 15: GPTQ v1 cannot store a zero point of 0 (it would be stored as -1).
  auto z_of = [](int64_t r, int64_t g) { return static_cast<uint32_t>((r * 3 + g * 11) % 15 + 1); };
  auto s_of = [](int64_t r, int64_t g) { return 0.0078125f * static_cast<float>((r + 2 * g) % 7 + 1); };
  for (const Format& format : formats) {
    SCOPED_TRACE(format.name);
    const bool symmetric = format.name == "compressed-tensors";
    const bool gptq = format.name.starts_with("gptq");
    auto zero_of = [&](int64_t r, int64_t g) { return symmetric ? 8u : z_of(r, g); };
    TinyModelSpec spec;
    spec.hidden_size = 64;
    spec.num_heads = 2;  // head_dim 32: a TP rank's o_proj columns are one group
    spec.num_kv_heads = 2;
    spec.intermediate_size = 64;
    spec.dtype = DType::kBF16;
    ASSERT_THAT(WriteTinyModel(dir_.path(), spec), IsOk());
    nlohmann::json config_json = testing::TinyConfigJson(spec);
    config_json["quantization_config"] = format.config;
    std::ofstream(dir_.path() / "config.json") << config_json.dump();
    testing::SafetensorsWriter writer;
    // Little-endian I32 words, as each format's packing writes them.
    auto raw = [](const std::vector<uint32_t>& words) {
      return std::string(reinterpret_cast<const char*>(words.data()), words.size() * 4);
    };
    for (const auto& [name, shape] : TinyTensorShapes(spec)) {
      if (!name.ends_with("_proj.weight")) {
        std::vector<float> values(static_cast<size_t>(NumElements(shape)));
        for (size_t i = 0; i < values.size(); ++i) values[i] = TinyValue(name, i);
        writer.Add(name, DType::kBF16, shape, values);
        continue;
      }
      const std::string module = name.substr(0, name.size() - std::string(".weight").size());
      const int64_t rows = shape[0], cols = shape[1], groups = cols / kGroup;
      if (symmetric) {
        // pack_to_int32: weight i of a row at bits 4 * (i % 8) of word i / 8, stored q + 8 = u.
        std::vector<uint32_t> packed(rows * cols / 8, 0);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t c = 0; c < cols; ++c) packed[r * (cols / 8) + c / 8] |= u_of(module, r, c) << (4 * (c % 8));
        }
        writer.AddRaw(module + ".weight_packed", "I32", {rows, cols / 8}, raw(packed));
        std::vector<float> scales(rows * groups);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t g = 0; g < groups; ++g) scales[r * groups + g] = s_of(r, g);
        }
        writer.Add(module + ".weight_scale", DType::kBF16, {rows, groups}, scales);
        continue;
      }
      // AWQ and GPTQ store [in, out]-shaped tensors: qzeros [groups, out / 8], scales [groups, out].
      std::vector<uint32_t> qzeros(groups * rows / 8, 0);
      std::vector<float> scales(groups * rows);
      for (int64_t g = 0; g < groups; ++g) {
        for (int64_t r = 0; r < rows; ++r) {
          scales[g * rows + r] = s_of(r, g);
          if (gptq) {
            // GPTQ: output column 8 * j + b in bits 4 * b; v1 stores the zero minus one.
            const uint32_t stored = (zero_of(r, g) - (format.name == "gptq" ? 1 : 0)) & 0xF;
            qzeros[g * (rows / 8) + r / 8] |= stored << (4 * (r % 8));
          } else {
            // AWQ: nibble i of word j holds output column 8 * j + order[i], order 0 2 4 6 1 3 5 7.
            const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
            const int position = static_cast<int>(std::find(order, order + 8, r % 8) - order);
            qzeros[g * (rows / 8) + r / 8] |= zero_of(r, g) << (4 * position);
          }
        }
      }
      std::vector<uint32_t> qweight(rows * cols / 8, 0);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          if (gptq) {  // [in / 8, out]: input row 8 * i + b in bits 4 * b
            qweight[(c / 8) * rows + r] |= u_of(module, r, c) << (4 * (c % 8));
          } else {  // [in, out / 8], AWQ's order over the output columns
            const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
            const int position = static_cast<int>(std::find(order, order + 8, r % 8) - order);
            qweight[c * (rows / 8) + r / 8] |= u_of(module, r, c) << (4 * position);
          }
        }
      }
      writer.AddRaw(module + ".qweight", "I32", gptq ? std::vector<int64_t>{cols / 8, rows}
                                                     : std::vector<int64_t>{cols, rows / 8},
                    raw(qweight));
      writer.AddRaw(module + ".qzeros", "I32", {groups, rows / 8}, raw(qzeros));
      writer.Add(module + ".scales", DType::kF16, {groups, rows}, scales);
      if (gptq) {
        std::vector<uint32_t> g_idx(cols);
        for (int64_t c = 0; c < cols; ++c) g_idx[c] = static_cast<uint32_t>(c / kGroup);
        writer.AddRaw(module + ".g_idx", "I32", {cols}, raw(g_idx));
      }
    }
    ASSERT_THAT(writer.Write(dir_.path() / "model.safetensors"), IsOk());
    absl::StatusOr<ModelConfig> config = LoadModelConfig(dir_.path());
    ASSERT_THAT(config, IsOk());
    ASSERT_TRUE(config->quantization.has_value());
    EXPECT_EQ(config->quantization->weight_dtype, DType::kI4);
    auto expect_module = [&](const Weight& w, const std::string& module, int64_t col_begin) {
      ASSERT_EQ(w.dtype, DType::kI4);
      EXPECT_EQ(w.group_size, kGroup);
      EXPECT_EQ(w.zeros == nullptr, symmetric);
      for (int64_t r = 0; r < w.shape[0]; ++r) {
        for (int64_t c = 0; c < w.shape[1]; ++c) {
          const int64_t g = (col_begin + c) / kGroup;
          const float expected = s_of(r, g) * (static_cast<float>(u_of(module, r, col_begin + c)) -
                                               static_cast<float>(zero_of(r, g)));
          ASSERT_EQ(Int4Value(w, r, c), expected) << module << " " << r << ", " << c;
        }
      }
    };
    absl::StatusOr<std::unique_ptr<LlamaWeights>> weights =
        LoadLlamaWeights(dir_.path(), *config, DType::kI4);
    ASSERT_THAT(weights, IsOk());
    EXPECT_EQ((*weights)->lm_head.dtype, DType::kBF16);
    expect_module((*weights)->layers[1].down_proj, "model.layers.1.mlp.down_proj", 0);
    expect_module((*weights)->layers[0].k_proj, "model.layers.0.self_attn.k_proj", 0);
    absl::StatusOr<ModelShard> shard =
        MakeModelShard(*config, ShardSpec{.tp_rank = 1, .tp_size = 2});
    ASSERT_THAT(shard, IsOk());
    absl::StatusOr<std::unique_ptr<LlamaWeights>> part =
        LoadLlamaWeights(dir_.path(), *config, DType::kI4, nullptr, &*shard);
    ASSERT_THAT(part, IsOk());
    expect_module((*part)->layers[0].o_proj, "model.layers.0.self_attn.o_proj", 32);
  }
}

// An int8 tensor in a checkpoint without a quantization_config is refused by name, not read as if
// its integers were the weights.
TEST_F(LlamaWeightsTest, Int8TensorInTheCheckpointIsUnimplemented) {
  TinyModelSpec spec;
  ASSERT_THAT(WriteTinyModel(dir_.path(), spec), IsOk());
  absl::StatusOr<ModelConfig> config = LoadModelConfig(dir_.path());
  ASSERT_THAT(config, IsOk());
  // Rewrite the checkpoint with q_proj of layer 0 as I8.
  testing::SafetensorsWriter writer;
  for (const auto& [name, shape] : TinyTensorShapes(spec)) {
    std::vector<float> values(static_cast<size_t>(NumElements(shape)));
    for (size_t i = 0; i < values.size(); ++i) values[i] = std::nearbyint(TinyValue(name, i) * 16);
    const bool int8 = name == "model.layers.0.self_attn.q_proj.weight";
    writer.Add(name, int8 ? DType::kI8 : DType::kF32, shape, values);
  }
  ASSERT_THAT(writer.Write(dir_.path() / "model.safetensors"), IsOk());
  for (DType matmul : {DType::kF32, DType::kI8}) {
    EXPECT_THAT(LoadLlamaWeights(dir_.path(), *config, matmul),
                StatusIs(absl::StatusCode::kUnimplemented,
                         AllOf(HasSubstr("model.layers.0.self_attn.q_proj.weight"),
                               HasSubstr("stored as i8"))));
  }
}

}  // namespace
}  // namespace baton::runtime
