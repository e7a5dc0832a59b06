// Prompt logprobs (GenerationParams::num_prompt_logprobs) through the engine: every prompt token
// after the first is scored as the model scores the next token of that prefix (the logits a request
// for the prefix alone samples from), whether the prompt runs whole, in chunks, across pipeline
// micro-batches, on TP ranks or on the emulated GPU; beside requests that ask for none; once, with the first token.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/engine/engine.h"
#include "tests/testing/engine_requests.h"
#include "tests/testing/safetensors_writer.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::absl_testing::StatusIs;
using ::testing::HasSubstr;
using testing::Greedy;
using testing::Prompt;

using Scores = std::vector<std::vector<kernels::TokenLogprob>>;

struct EngineSetup {
  std::string name;
  int tp = 1;
  int pp = 1;
  bool chunked = false;  // chunked prefill, 6 tokens a step
  DeviceKind device = DeviceKind::kCpu;
};

class PromptLogprobsTest : public ::testing::TestWithParam<EngineSetup> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::ScopedTempDir();
    ASSERT_THAT(testing::WriteTinyModel(dir_->path(), testing::TinyEngineSpec()), IsOk());
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::unique_ptr<Engine> MakeEngine(const EngineSetup& setup) {
    EngineConfig config{.model_dir = dir_->path(),
                        .parallel = {.tp_size = setup.tp, .pp_size = setup.pp},
                        .device = setup.device,
                        .num_threads = 1,
                        .block_size = 4,
                        .kv_cache_bytes = 4 << 20,
                        .max_num_seqs = 16,
                        .max_num_batched_tokens = setup.chunked ? 6 : 64,
                        .chunked_prefill = setup.chunked,
                        .max_model_len = 96};
    auto engine = Engine::Create(config);
    EXPECT_THAT(engine, IsOk());
    return engine.ok() ? std::move(*engine) : nullptr;
  }

  // What each prompt token's score should be: the first-token logits of the prefix before it, on
  // one rank with the prompt whole, through kernels::TopLogprobs.
  static Scores Expected(const std::vector<int32_t>& prompt, int k) {
    Scores expected(1);
    auto engine = MakeEngine(EngineSetup{});
    for (size_t i = 1; i < prompt.size(); ++i) {
      GenerationParams params = Greedy(1);
      params.return_logits = true;
      auto id = engine->AddRequest({prompt.begin(), prompt.begin() + i}, params);
      EXPECT_THAT(id, IsOk());
      auto outputs = engine->Step();
      EXPECT_THAT(outputs, IsOk());
      if (!outputs.ok() || outputs->size() != 1) return {};
      expected.push_back(kernels::TopLogprobs((*outputs)[0].logits, k, prompt[i]));
    }
    return expected;
  }

  // The outputs of a run, by sequence, in order.
  static std::map<SeqId, std::vector<TokenOutput>> Run(Engine& engine) {
    std::map<SeqId, std::vector<TokenOutput>> outputs;
    while (engine.HasWork()) {
      auto step = engine.Step();
      EXPECT_THAT(step, IsOk());
      if (!step.ok()) break;
      for (TokenOutput& out : *step) outputs[out.seq_id].push_back(std::move(out));
    }
    return outputs;
  }

  static void ExpectScores(const Scores& actual, const Scores& expected) {
    ASSERT_EQ(actual.size(), expected.size());
    EXPECT_TRUE(actual[0].empty()) << "nothing precedes the first token";
    for (size_t i = 1; i < actual.size(); ++i) {
      ASSERT_EQ(actual[i].size(), expected[i].size()) << "token " << i;
      for (size_t j = 0; j < actual[i].size(); ++j) {
        EXPECT_EQ(actual[i][j].token_id, expected[i][j].token_id) << "token " << i << " entry " << j;
        // TP ranks sum their partial products in another order: relative to the logprob's size.
        EXPECT_NEAR(actual[i][j].logprob, expected[i][j].logprob,
                    1e-4 * std::max(1.0f, std::abs(expected[i][j].logprob)))
            << "token " << i;
      }
    }
  }

  static testing::ScopedTempDir* dir_;
};

testing::ScopedTempDir* PromptLogprobsTest::dir_ = nullptr;

TEST_P(PromptLogprobsTest, ScoresEveryPromptTokenAsThePrefixAloneWouldBeScored) {
  const std::vector<int32_t> long_prompt = Prompt(23, 1);
  const std::vector<int32_t> short_prompt = Prompt(5, 2);
  const Scores expected_long = Expected(long_prompt, 3);
  const Scores expected_short = Expected(short_prompt, 0);

  auto engine = MakeEngine(GetParam());
  GenerationParams top3 = Greedy(4);
  top3.num_prompt_logprobs = 3;
  GenerationParams own_only = Greedy(4);
  own_only.num_prompt_logprobs = 0;
  auto bystander = engine->AddRequest(Prompt(17, 3), Greedy(4));  // asks for none
  auto scored_long = engine->AddRequest(long_prompt, top3);
  auto scored_short = engine->AddRequest(short_prompt, own_only);
  ASSERT_THAT(bystander, IsOk());
  ASSERT_THAT(scored_long, IsOk());
  ASSERT_THAT(scored_short, IsOk());
  auto outputs = Run(*engine);

  for (const auto& [id, outs] : outputs) {
    ASSERT_EQ(outs.size(), 4u);
    for (size_t t = 1; t < outs.size(); ++t) {
      EXPECT_TRUE(outs[t].prompt_logprobs.empty()) << "the prompt's scores come once, first";
    }
  }
  EXPECT_TRUE(outputs[*bystander][0].prompt_logprobs.empty());
  ExpectScores(outputs[*scored_long][0].prompt_logprobs, expected_long);
  ExpectScores(outputs[*scored_short][0].prompt_logprobs, expected_short);
  // k = 0 lists the prompt token alone.
  for (size_t i = 1; i < short_prompt.size(); ++i) {
    ASSERT_EQ(outputs[*scored_short][0].prompt_logprobs[i].size(), 1u);
    EXPECT_EQ(outputs[*scored_short][0].prompt_logprobs[i][0].token_id, short_prompt[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, PromptLogprobsTest,
                         ::testing::Values(EngineSetup{.name = "whole"},
                                           EngineSetup{.name = "chunked", .chunked = true},
                                           EngineSetup{.name = "tp2", .tp = 2},
                                           EngineSetup{.name = "pp2", .pp = 2},
                                           EngineSetup{.name = "tp2_pp2_chunked", .tp = 2, .pp = 2, .chunked = true},
                                           // The GPU path (device copies, graphs off for prompts)
                                           // through the SIMT emulation.
                                           EngineSetup{.name = "cuda_emulated", .chunked = true,
                                                       .device = DeviceKind::kCudaEmulated}),
                         [](const ::testing::TestParamInfo<EngineSetup>& info) { return info.param.name; });

TEST(PromptLogprobsEdgeTest, AOneTokenPromptHasOnlyTheEmptyFirstEntry) {
  testing::ScopedTempDir dir;
  ASSERT_THAT(testing::WriteTinyModel(dir.path(), testing::TinyEngineSpec()), IsOk());
  auto engine = Engine::Create(EngineConfig{.model_dir = dir.path(), .max_model_len = 64});
  ASSERT_THAT(engine, IsOk());
  GenerationParams params = Greedy(2);
  params.num_prompt_logprobs = 5;
  ASSERT_THAT((*engine)->AddRequest({7}, params), IsOk());
  auto first = (*engine)->Step();
  ASSERT_THAT(first, IsOk());
  ASSERT_EQ(first->size(), 1u);
  ASSERT_EQ((*first)[0].prompt_logprobs.size(), 1u);
  EXPECT_TRUE((*first)[0].prompt_logprobs[0].empty());
}

TEST(PromptLogprobsEdgeTest, MoreThanTwentyIsRefusedNamingTheField) {
  testing::ScopedTempDir dir;
  ASSERT_THAT(testing::WriteTinyModel(dir.path(), testing::TinyEngineSpec()), IsOk());
  auto engine = Engine::Create(EngineConfig{.model_dir = dir.path(), .max_model_len = 64});
  ASSERT_THAT(engine, IsOk());
  GenerationParams params = Greedy(2);
  params.num_prompt_logprobs = 21;
  EXPECT_THAT((*engine)->AddRequest(Prompt(4, 0), params),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("prompt_logprobs 21")));
}

}  // namespace
}  // namespace baton::runtime
