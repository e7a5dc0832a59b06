// Decode steps replayed as graphs on the emulated GPU: the same tokens and logits as op-by-op
// steps, one capture per padded shape, no single launch in a replayed step, and a new capture when
// a larger step moved the scratch a graph had captured.
#include "runtime/model/decode_graphs.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/thread_pool.h"
#include "runtime/backend/device_buffer.h"
#include "runtime/backend/emulated_gpu_runtime.h"
#include "runtime/backend/gpu_backend.h"
#include "runtime/kv_cache/kv_pool.h"
#include "runtime/model/llama_model.h"
#include "tests/testing/safetensors_writer.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/step_builder.h"
#include "tests/testing/temp_dir.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using Step = testing::StepBuilder;

constexpr int kNumBlocks = 32;

TEST(DecodeGraphShapeTest, PadsSequencesAndWidthToPowersOfTwo) {
  Step step;
  step.max_blocks_per_seq = 3;
  step.num_decode_seqs = 3;
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6};
  for (int s = 0; s < 3; ++s) step.Add(tokens, 5, 6, {s, 3 + s});
  const std::optional<DecodeGraphShape> shape = DecodeGraphs::ShapeOf(step.Batch());
  ASSERT_TRUE(shape.has_value());
  EXPECT_EQ(*shape, (DecodeGraphShape{.num_seqs = 4, .max_blocks_per_seq = 4}));

  DecodeGraphs graphs(nullptr);
  const StepBatch padded = graphs.Pad(step.Batch(), *shape);
  EXPECT_EQ(padded.num_seqs(), 4);
  EXPECT_EQ(padded.num_decode_seqs, 4);
  EXPECT_EQ(padded.max_blocks_per_seq, 4);
  EXPECT_EQ(std::vector<int32_t>(padded.slot_mapping.begin(), padded.slot_mapping.end()),
            (std::vector<int32_t>{step.slot_mapping[0], step.slot_mapping[1],
                                  step.slot_mapping[2], -1}));
  EXPECT_EQ(std::vector<int32_t>(padded.context_lens.begin(), padded.context_lens.end()),
            (std::vector<int32_t>{6, 6, 6, 1}));
  EXPECT_EQ(std::vector<int32_t>(padded.block_tables.begin(), padded.block_tables.end()),
            (std::vector<int32_t>{0, 3, 0, 0, 1, 4, 0, 0, 2, 5, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(padded.sampling.size(), 4u);

  // Prompt tokens, or more sequences than the largest graph: no graph.
  Step prompt;
  prompt.Add(tokens, 0, 6, {0, 1});
  EXPECT_FALSE(DecodeGraphs::ShapeOf(prompt.Batch()).has_value());
  Step wide;
  wide.max_blocks_per_seq = 1;
  wide.num_decode_seqs = DecodeGraphs::kMaxBatch + 1;
  for (int s = 0; s <= DecodeGraphs::kMaxBatch; ++s) wide.Add(tokens, 0, 1, {s});
  EXPECT_FALSE(DecodeGraphs::ShapeOf(wide.Batch()).has_value());
}

// One model on the emulated GPU, with its KV pool in device memory.
struct EmulatedModel {
  explicit EmulatedModel(const std::filesystem::path& dir, bool graphs)
      : runtime(new EmulatedGpuRuntime()),
        backend(DeviceKind::kCudaEmulated, std::unique_ptr<GpuRuntime>(runtime)),
        kv_storage(&backend) {
    auto loaded = LlamaModel::Load(dir, DType::kF32, &backend, &pool);
    EXPECT_THAT(loaded, IsOk());
    model = *std::move(loaded);
    const KvPoolShape shape = model->KvShape(4);
    EXPECT_THAT(kv_storage.Reserve(shape.BlockBytes() * kNumBlocks), IsOk());
    auto created = KvPool::Create(
        shape, kNumBlocks, KvPoolOptions{.device_storage = kv_storage.data<std::byte>()});
    EXPECT_THAT(created, IsOk());
    kv_pool = *std::move(created);
    if (graphs) {
      EXPECT_TRUE(model->EnableDecodeGraphs());
    }
  }

  ThreadPool pool{1};
  EmulatedGpuRuntime* runtime;  // owned by backend
  GpuBackend backend;
  DeviceBuffer kv_storage;
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<KvPool> kv_pool;
};

class DecodeGraphsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_THAT(testing::WriteTinyModel(dir_.path(), testing::TinyEngineSpec()), IsOk());
  }
  testing::ScopedTempDir dir_;
};

TEST_F(DecodeGraphsTest, ReplayedStepsMatchOpByOpStepsAndCaptureOncePerShape) {
  EmulatedModel eager(dir_.path(), /*graphs=*/false);
  EmulatedModel graphed(dir_.path(), /*graphs=*/true);
  ASSERT_NE(graphed.model->decode_graphs(), nullptr);
  const std::vector<std::vector<int32_t>> blocks = {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}};
  std::vector<std::vector<int32_t>> seqs = {{5, 17, 3, 88, 42}, {7, 8, 9}, {90, 4, 61, 2, 2, 2}};
  const std::vector<TokenSampling> sampling = {
      {}, {.options = {.temperature = 0.9f, .top_k = 8}, .seed = 5}, {}};

  auto run_both = [&](const Step& step, std::vector<int32_t>* tokens) {
    StepBatch batch = step.Batch();
    batch.sampling = std::span<const TokenSampling>(sampling).first(batch.num_seqs());
    StepOutput expected, actual;
    ASSERT_THAT(eager.model->Forward(batch, *eager.kv_pool, &expected), IsOk());
    ASSERT_THAT(graphed.model->Forward(batch, *graphed.kv_pool, &actual), IsOk());
    EXPECT_EQ(actual.token_ids, expected.token_ids);
    ASSERT_EQ(actual.logits.size(), expected.logits.size());
    EXPECT_EQ(std::memcmp(actual.logits.data(), expected.logits.data(),
                          sizeof(float) * actual.logits.size()),
              0);
    *tokens = actual.token_ids;
  };

  // The prompts, op by op on both.
  Step prompts;
  for (size_t s = 0; s < seqs.size(); ++s) {
    prompts.Add(seqs[s], 0, static_cast<int>(seqs[s].size()), blocks[s]);
  }
  std::vector<int32_t> tokens;
  run_both(prompts, &tokens);
  for (size_t s = 0; s < seqs.size(); ++s) seqs[s].push_back(tokens[s]);
  EXPECT_EQ(graphed.model->decode_graphs()->num_captures(), 0);

  // Decode steps of 3 sequences (padded to 4), all within a 4-block table: one capture.
  int64_t graph_launches = 0;
  for (int i = 0; i < 4; ++i) {
    Step step;
    step.num_decode_seqs = 3;
    for (size_t s = 0; s < seqs.size(); ++s) {
      const int len = static_cast<int>(seqs[s].size());
      step.Add(seqs[s], len - 1, len, blocks[s]);
    }
    const int64_t launches = graphed.runtime->stats().num_launches;
    run_both(step, &tokens);
    for (size_t s = 0; s < seqs.size(); ++s) seqs[s].push_back(tokens[s]);
    EXPECT_EQ(graphed.runtime->stats().num_graph_launches, ++graph_launches);
    if (i > 0) {
      EXPECT_EQ(graphed.runtime->stats().num_launches, launches);  // replay only
    }
  }
  EXPECT_EQ(graphed.model->decode_graphs()->num_captures(), 1);

  // Two sequences: another shape, another capture.
  Step two;
  two.num_decode_seqs = 2;
  for (size_t s = 0; s < 2; ++s) {
    const int len = static_cast<int>(seqs[s].size());
    two.Add(seqs[s], len - 1, len, blocks[s]);
  }
  run_both(two, &tokens);
  seqs[0].push_back(tokens[0]);
  seqs[1].push_back(tokens[1]);
  EXPECT_EQ(graphed.model->decode_graphs()->num_captures(), 2);
  EXPECT_EQ(graphed.model->decode_graphs()->num_graphs(), 2);

  // A longer prompt regrows the scratch; the 3-sequence graph is captured again, and still agrees.
  std::vector<int32_t> long_prompt(40, 11);
  Step big;
  big.max_blocks_per_seq = 12;
  big.Add(long_prompt, 0, 40, {12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22});
  run_both(big, &tokens);
  Step again;
  again.num_decode_seqs = 3;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const int len = static_cast<int>(seqs[s].size());
    again.Add(seqs[s], len - 1, len, blocks[s]);
  }
  run_both(again, &tokens);
  EXPECT_EQ(graphed.model->decode_graphs()->num_captures(), 3);
}

}  // namespace
}  // namespace baton::runtime
