// The engine on tp x pp ranks (model_ranks.h): the same greedy tokens and (up to the order of the TP
// reductions) the same logits as one rank, for a continuous batch of mixed prompts; batch invariance
// inside each layout (the same tokens, and logits within 1e-5, alone as in a batch: as for one
// rank, the kernels' blocking depends on the batch, so the last bits may differ); micro-batch
// plans; what each rank holds; clear errors for layouts that do not fit.
#include "runtime/engine/model_ranks.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/model_runner.h"
#include "tests/testing/checkpoint_layouts.h"
#include "tests/testing/safetensors_writer.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;

// Micro-batches as (seq, q_begin, q_len) lists.
using Plan = std::vector<std::vector<StepPiece>>;

TEST(PlanMicroBatchesTest, OneStageIsOneBatchOfWholeSequences) {
  EXPECT_EQ(PlanMicroBatches(std::vector<int>{}, 2, 1), Plan{});
  EXPECT_EQ(PlanMicroBatches(std::vector<int>{1, 1, 300}, 1, 1),
            (Plan{{{0, 0, 1}, {1, 0, 1}, {2, 0, 300}}}));
}

TEST(PlanMicroBatchesTest, DecodeStepsOneAtATimeGetOneMicroBatchPerStage) {
  EXPECT_EQ(PlanMicroBatches(std::vector<int>{1, 1, 1, 1}, 2, 1),
            (Plan{{{0, 0, 1}, {1, 0, 1}}, {{2, 0, 1}, {3, 0, 1}}}));
  EXPECT_EQ(PlanMicroBatches(std::vector<int>{1, 1, 1}, 2, 1),
            (Plan{{{0, 0, 1}, {1, 0, 1}}, {{2, 0, 1}}}));
  EXPECT_EQ(PlanMicroBatches(std::vector<int>{1}, 3, 1), (Plan{{{0, 0, 1}}}));
}

TEST(PlanMicroBatchesTest, DecodeStepsInFlightPerStageAreOneMicroBatch) {
  // The steps in flight fill the pipeline: cutting a step would only read the weights again.
  EXPECT_EQ(PlanMicroBatches(std::vector<int>{1, 1, 1, 1}, 2, 2),
            (Plan{{{0, 0, 1}, {1, 0, 1}, {2, 0, 1}, {3, 0, 1}}}));
  // Two steps in flight on four stages: each step cut in two.
  EXPECT_EQ(PlanMicroBatches(std::vector<int>{1, 1, 1, 1}, 4, 2),
            (Plan{{{0, 0, 1}, {1, 0, 1}}, {{2, 0, 1}, {3, 0, 1}}}));
}

TEST(PlanMicroBatchesTest, ALonePromptIsCutIntoChunksForTheStages) {
  for (int in_flight : {1, 2}) {
    EXPECT_EQ(PlanMicroBatches(std::vector<int>{512}, 2, in_flight),
              (Plan{{{0, 0, 128}}, {{0, 128, 128}}, {{0, 256, 128}}, {{0, 384, 128}}}));
  }
  // Chunks keep at least kMinChunkTokens tokens: a short prompt is not cut.
  EXPECT_EQ(PlanMicroBatches(std::vector<int>{20}, 2, 2), (Plan{{{0, 0, 20}}}));
  EXPECT_EQ(PlanMicroBatches(std::vector<int>{40}, 2, 2), (Plan{{{0, 0, 20}}, {{0, 20, 20}}}));
}

TEST(PlanMicroBatchesTest, DecodeSequencesStayFirstAndEveryTokenIsInOnePiece) {
  const std::vector<int> q_lens = {1, 1, 1, 1, 30, 97, 5};
  for (int stages : {2, 3, 4}) {
    const Plan plan = PlanMicroBatches(q_lens, stages, 1);
    EXPECT_LE(static_cast<int>(plan.size()), 2 * stages);
    std::vector<int> covered(q_lens.size(), 0);
    for (const auto& pieces : plan) {
      ASSERT_FALSE(pieces.empty());
      bool seen_prompt = false;
      for (const StepPiece& piece : pieces) {
        EXPECT_EQ(piece.q_begin, covered[piece.seq]) << "chunks in order, no gap";
        covered[piece.seq] += piece.q_len;
        if (piece.seq >= 4) seen_prompt = true;
        if (piece.seq < 4) {
          EXPECT_FALSE(seen_prompt) << "a decode sequence after a prompt";
        }
      }
    }
    for (size_t i = 0; i < q_lens.size(); ++i) EXPECT_EQ(covered[i], q_lens[i]);
  }
}

struct Layout {
  int tp;
  int pp;
};

std::string LayoutName(const ::testing::TestParamInfo<Layout>& info) {
  return "tp" + std::to_string(info.param.tp) + "_pp" + std::to_string(info.param.pp);
}

// Generated tokens and per-token logits of each request of a run.
struct RunResult {
  std::map<SeqId, std::vector<int32_t>> tokens;
  std::map<SeqId, std::vector<std::vector<float>>> logits;
};

class EngineLayoutBase : public ::testing::Test {
 protected:
  std::unique_ptr<Engine> MakeEngine(const std::filesystem::path& model_dir, Layout layout,
                                     bool chunked_prefill = false) {
    EngineConfig config{.model_dir = model_dir,
                        .parallel = {.tp_size = layout.tp, .pp_size = layout.pp},
                        .num_threads = 1,
                        .block_size = 4,
                        .kv_cache_bytes = 4 << 20,
                        .max_num_seqs = 16,
                        .max_num_batched_tokens = chunked_prefill ? 16 : 64,
                        .chunked_prefill = chunked_prefill,
                        .max_model_len = 96};
    auto engine = Engine::Create(config);
    EXPECT_THAT(engine, IsOk());
    return engine.ok() ? std::move(*engine) : nullptr;
  }

  static std::vector<int32_t> Prompt(int len, int salt, int vocab_size) {
    std::vector<int32_t> ids(len);
    for (int i = 0; i < len; ++i) ids[i] = (i * 37 + salt * 11 + 5) % vocab_size;
    return ids;
  }

  static GenerationParams Greedy(int max_tokens) {
    GenerationParams params;
    params.max_tokens = max_tokens;
    params.ignore_eos = true;
    params.return_logits = true;
    return params;
  }

  // Adds the prompts (lengths) at once and runs the engine until idle.
  static RunResult Run(Engine& engine, const std::vector<int>& lengths, int max_tokens) {
    RunResult result;
    std::vector<SeqId> ids;
    for (size_t i = 0; i < lengths.size(); ++i) {
      auto id = engine.AddRequest(Prompt(lengths[i], static_cast<int>(i),
                                         engine.model_config().vocab_size),
                                  Greedy(max_tokens));
      EXPECT_THAT(id, IsOk());
    }
    while (engine.HasWork()) {
      auto outputs = engine.Step();
      EXPECT_THAT(outputs, IsOk());
      if (!outputs.ok()) break;
      for (auto& out : *outputs) {
        result.tokens[out.seq_id].push_back(out.token_id);
        result.logits[out.seq_id].push_back(std::move(out.logits));
      }
    }
    EXPECT_EQ(engine.allocator().num_blocks_used(), 0);
    return result;
  }

  // Greedy tokens equal, logits within 1e-5 of the largest |logit| of the row.
  static void ExpectSameTokens(const std::vector<int32_t>& expected_tokens,
                               const std::vector<std::vector<float>>& expected_logits,
                               const std::vector<int32_t>& tokens,
                               const std::vector<std::vector<float>>& logits) {
    ASSERT_EQ(expected_tokens, tokens);
    ASSERT_EQ(expected_logits.size(), logits.size());
    for (size_t t = 0; t < logits.size(); ++t) {
      ASSERT_EQ(expected_logits[t].size(), logits[t].size());
      float scale = 0;
      for (float x : expected_logits[t]) scale = std::max(scale, std::abs(x));
      for (size_t v = 0; v < logits[t].size(); ++v) {
        ASSERT_NEAR(logits[t][v], expected_logits[t][v], 1e-5f * scale)
            << "token " << t << " logit " << v;
      }
    }
  }

  static void ExpectSameRun(const RunResult& expected, const RunResult& actual) {
    ASSERT_EQ(expected.tokens.size(), actual.tokens.size());
    for (const auto& [seq, tokens] : expected.tokens) {
      SCOPED_TRACE(::testing::Message() << "request " << seq);
      ExpectSameTokens(tokens, expected.logits.at(seq), actual.tokens.at(seq), actual.logits.at(seq));
    }
  }
};

// Prompts of mixed lengths arriving together: prefill steps of several prompts, then decode steps of
// up to eight sequences (cut into micro-batches on pp > 1).
const std::vector<int> kLengths = {1, 3, 17, 5, 30, 9, 2, 12};

class EngineLayoutTest : public EngineLayoutBase, public ::testing::WithParamInterface<Layout> {
 protected:
  void SetUp() override {
    ASSERT_THAT(testing::WriteTinyModel(dir_.path(), testing::TinyEngineSpec()), IsOk());
  }
  testing::ScopedTempDir dir_;
};

TEST_P(EngineLayoutTest, MatchesOneRankOnABatchOfMixedPrompts) {
  for (bool chunked : {false, true}) {
    SCOPED_TRACE(chunked ? "chunked prefill" : "prefill-first");
    auto whole = MakeEngine(dir_.path(), {1, 1}, chunked);
    auto ranked = MakeEngine(dir_.path(), GetParam(), chunked);
    ASSERT_NE(whole, nullptr);
    ASSERT_NE(ranked, nullptr);
    EXPECT_EQ(ranked->ranks().num_ranks(), GetParam().tp * GetParam().pp);
    ExpectSameRun(Run(*whole, kLengths, 10), Run(*ranked, kLengths, 10));
  }
}

TEST_P(EngineLayoutTest, EachPromptGivesTheSameTokensAloneAndInTheBatch) {
  auto batched_engine = MakeEngine(dir_.path(), GetParam());
  ASSERT_NE(batched_engine, nullptr);
  const RunResult batched = Run(*batched_engine, kLengths, 6);
  for (size_t i = 0; i < kLengths.size(); ++i) {
    auto engine = MakeEngine(dir_.path(), GetParam());
    ASSERT_NE(engine, nullptr);
    // Prompt i was request i of the batch.
    auto id = engine->AddRequest(Prompt(kLengths[i], static_cast<int>(i),
                                        engine->model_config().vocab_size),
                                 Greedy(6));
    ASSERT_THAT(id, IsOk());
    RunResult alone;
    while (engine->HasWork()) {
      auto outputs = engine->Step();
      ASSERT_THAT(outputs, IsOk());
      for (auto& out : *outputs) {
        alone.tokens[out.seq_id].push_back(out.token_id);
        alone.logits[out.seq_id].push_back(std::move(out.logits));
      }
    }
    SCOPED_TRACE(::testing::Message() << "prompt " << i);
    const SeqId in_batch = static_cast<SeqId>(i);
    ExpectSameTokens(batched.tokens.at(in_batch), batched.logits.at(in_batch), alone.tokens.at(*id),
                     alone.logits.at(*id));
  }
}

// TinyEngineSpec: 4 heads, 2 KV heads, 2 layers, intermediate 48. tp 4 replicates each KV head on
// two ranks.
INSTANTIATE_TEST_SUITE_P(Layouts, EngineLayoutTest,
                         ::testing::Values(Layout{2, 1}, Layout{4, 1}, Layout{1, 2}, Layout{2, 2}),
                         LayoutName);

class ModelRanksTest : public EngineLayoutBase {
 protected:
  void SetUp() override {
    ASSERT_THAT(testing::WriteTinyModel(dir_.path(), testing::TinyEngineSpec()), IsOk());
  }
  testing::ScopedTempDir dir_;
};

TEST_F(ModelRanksTest, EachRankHoldsItsLayersAndKvHeads) {
  auto whole = ModelRanks::Create({.model_dir = dir_.path(), .kv_cache_bytes = 1 << 20});
  auto tp2_pp2 = ModelRanks::Create({.model_dir = dir_.path(),
                                     .layout = {.tp_size = 2, .pp_size = 2},
                                     .kv_cache_bytes = 1 << 20});
  ASSERT_THAT(whole, IsOk());
  ASSERT_THAT(tp2_pp2, IsOk());
  // Each rank holds one layer and one KV head: a quarter of a whole block, and the budget split
  // four ways holds as many blocks as the whole model's.
  EXPECT_EQ((*tp2_pp2)->num_blocks(), (*whole)->num_blocks());
  int64_t kv_bytes = 0;
  for (int r = 0; r < 4; ++r) {
    const RankHoldings held = (*tp2_pp2)->holdings(r);
    EXPECT_EQ(held.shard.layer_begin, r / 2);
    EXPECT_EQ(held.shard.layer_end, r / 2 + 1);
    EXPECT_EQ(held.shard.kv_head_begin, r % 2);
    EXPECT_EQ(held.shard.kv_head_end, r % 2 + 1);
    EXPECT_EQ((*tp2_pp2)->kv_pool(r).num_blocks(), (*whole)->num_blocks());
    EXPECT_GT(held.weight_bytes, 0);
    kv_bytes += held.kv_block_bytes;
  }
  EXPECT_EQ(kv_bytes, (*whole)->holdings(0).kv_block_bytes);
}

TEST_F(ModelRanksTest, LayoutsThatDoNotFitAreClearErrors) {
  // 4 heads do not split over 3 ranks; 2 layers do not fill 3 stages.
  EXPECT_THAT(ModelRanks::Create({.model_dir = dir_.path(), .layout = {.tp_size = 3}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("3")));
  EXPECT_THAT(ModelRanks::Create({.model_dir = dir_.path(), .layout = {.pp_size = 3}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("3")));
  EXPECT_THAT(ModelRanks::Create({.model_dir = dir_.path(), .layout = {.tp_size = 0}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tp 0")));
  EXPECT_THAT(ModelRanks::Create({.model_dir = dir_.path(), .threads_per_rank = 0}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("threads_per_rank")));
  EXPECT_THAT(ModelRanks::Create({.model_dir = dir_.path(),
                                  .layout = {.tp_size = 2},
                                  .kv_shm_names = {"/baton-test-only-one"}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1 KV segment names for 2")));
  EXPECT_THAT(ModelRanks::Create({.model_dir = dir_.path(),
                                  .layout = {.tp_size = 2},
                                  .kv_cache_bytes = 16}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("holds no block")));
}

class EngineCheckpointLayoutTest : public EngineLayoutBase,
                                   public ::testing::WithParamInterface<testing::CheckpointLayout> {
 protected:
  void SetUp() override {
    std::optional<std::filesystem::path> dir = testing::GeneratedCheckpoint(GetParam().model);
    if (!dir) GTEST_SKIP() << "no generated " << GetParam().model << " (BATON_TEST_MODELS_DIR)";
    model_dir_ = *dir;
  }
  std::filesystem::path model_dir_;
};

TEST_P(EngineCheckpointLayoutTest, MatchesOneRankOnABatchOfMixedPrompts) {
  const runtime::ParallelLayout& layout = GetParam().layout;
  auto whole = MakeEngine(model_dir_, {1, 1});
  auto ranked = MakeEngine(model_dir_, {layout.tp_size, layout.pp_size});
  ASSERT_NE(whole, nullptr);
  ASSERT_NE(ranked, nullptr);
  ExpectSameRun(Run(*whole, kLengths, 8), Run(*ranked, kLengths, 8));
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, EngineCheckpointLayoutTest,
                         ::testing::ValuesIn(testing::CheckpointLayouts()),
                         [](const auto& info) { return info.param.Name(); });

}  // namespace
}  // namespace baton::runtime
