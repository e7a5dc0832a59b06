// The logits processors through the engine (penalties, logit_bias, min_tokens, and min_p): each does
// what it says to the tokens; the cuda-emulated device gives the CPU's tokens with them on; and a
// request handed over or resumed from its tokens continues exactly as the uninterrupted run, since
// the counts come from the tokens themselves.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
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
using testing::TransferKv;

using Outcome = testing::RunOutcome;
using testing::RunToCompletion;

class LogitsProcessorsEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_THAT(testing::WriteTinyModel(dir_.path(), testing::TinyEngineSpec()), IsOk());
  }

  std::unique_ptr<Engine> MakeEngine(DeviceKind device = DeviceKind::kCpu, bool chunked = false) {
    EngineConfig config{.model_dir = dir_.path(),
                        .device = device,
                        .num_threads = 2,
                        .block_size = 4,
                        .kv_cache_bytes = 1 << 20,
                        .max_num_seqs = 16,
                        .max_num_batched_tokens = chunked ? 6 : 64,
                        .chunked_prefill = chunked,
                        .max_model_len = 128};
    auto engine = Engine::Create(config);
    EXPECT_THAT(engine, IsOk());
    return engine.ok() ? std::move(*engine) : nullptr;
  }




  Outcome Generate(const std::vector<int32_t>& prompt, const GenerationParams& params,
               DeviceKind device = DeviceKind::kCpu) {
    auto engine = MakeEngine(device);
    auto id = engine->AddRequest(prompt, params);
    EXPECT_THAT(id, IsOk());
    return RunToCompletion(*engine)[*id];
  }


  // Penalties, bias and min_tokens all on, for the comparisons.
  static GenerationParams AllOn(int max_tokens) {
    GenerationParams params = Greedy(max_tokens);
    params.logits_processors.repetition_penalty = 1.3f;
    params.logits_processors.frequency_penalty = 0.4f;
    params.logits_processors.presence_penalty = 0.3f;
    params.logits_processors.logit_bias = {{5, 1.5f}, {40, -3.0f}};
    params.logits_processors.min_tokens = 3;
    params.stop_token_ids = {9};
    return params;
  }

  testing::ScopedTempDir dir_;
};

TEST_F(LogitsProcessorsEngineTest, LogitBiasForcesAndForbidsTokens) {
  const std::vector<int32_t> prompt = Prompt(9, 1);
  GenerationParams params = Greedy(6);
  params.logits_processors.logit_bias = {{7, 100.0f}};
  EXPECT_EQ(Generate(prompt, params).tokens, std::vector<int32_t>(6, 7));

  const std::vector<int32_t> plain = Generate(prompt, Greedy(6)).tokens;
  params.logits_processors.logit_bias = {{plain[0], -100.0f}};
  EXPECT_NE(Generate(prompt, params).tokens[0], plain[0]);
}

// The logits (and so the logprobs) a request gets back are the model's, before the processors, as
// vLLM's are by default; the token is drawn from the processed ones.
TEST_F(LogitsProcessorsEngineTest, ReturnedLogitsAreTheRawOnes) {
  const std::vector<int32_t> prompt = Prompt(9, 1);
  std::vector<std::vector<float>> rows[2];
  for (int biased = 0; biased < 2; ++biased) {
    auto engine = MakeEngine();
    GenerationParams params = Greedy(1);
    params.return_logits = true;
    if (biased == 1) params.logits_processors.logit_bias = {{7, 100.0f}};
    ASSERT_THAT(engine->AddRequest(prompt, params), IsOk());
    auto outputs = engine->Step();
    ASSERT_THAT(outputs, IsOk());
    ASSERT_EQ(outputs->size(), 1u);
    if (biased == 1) {
      EXPECT_EQ((*outputs)[0].token_id, 7);
    }
    rows[biased].push_back((*outputs)[0].logits);
  }
  EXPECT_EQ(rows[0], rows[1]);
}

TEST_F(LogitsProcessorsEngineTest, PenaltiesChangeRepeatsAndNeutralValuesChangeNothing) {
  const std::vector<int32_t> prompt = Prompt(12, 2);
  const std::vector<int32_t> plain = Generate(prompt, Greedy(24)).tokens;
  GenerationParams neutral = Greedy(24);
  neutral.logits_processors.logit_bias = {{3, 0.0f}};  // a processor runs, and changes nothing
  EXPECT_EQ(Generate(prompt, neutral).tokens, plain);

  // A strong frequency penalty: the greedy run repeats tokens less.
  const auto distinct = [](const std::vector<int32_t>& t) {
    std::vector<int32_t> s = t;
    std::sort(s.begin(), s.end());
    return std::unique(s.begin(), s.end()) - s.begin();
  };
  GenerationParams frequency = Greedy(24);
  frequency.logits_processors.frequency_penalty = 2.0f;
  frequency.logits_processors.presence_penalty = 2.0f;
  const std::vector<int32_t> penalized = Generate(prompt, frequency).tokens;
  EXPECT_NE(penalized, plain);
  EXPECT_GE(distinct(penalized), distinct(plain));
}

TEST_F(LogitsProcessorsEngineTest, MinTokensMasksStopTokensUntilReached) {
  const std::vector<int32_t> prompt = Prompt(9, 3);
  const std::vector<int32_t> plain = Generate(prompt, Greedy(8)).tokens;
  GenerationParams params = Greedy(8);
  params.stop_token_ids = {plain[0]};  // the greedy first token: stops at once
  const Outcome stopped = Generate(prompt, params);
  EXPECT_EQ(stopped.tokens, std::vector<int32_t>{plain[0]});
  EXPECT_EQ(stopped.finish, FinishReason::kStop);

  params.logits_processors.min_tokens = 5;
  const Outcome run = Generate(prompt, params);
  ASSERT_GE(run.tokens.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_NE(run.tokens[i], plain[0]) << "token " << i;
}

TEST_F(LogitsProcessorsEngineTest, MinPOneIsGreedyAtAnyTemperature) {
  const std::vector<int32_t> prompt = Prompt(10, 4);
  const std::vector<int32_t> greedy = Generate(prompt, Greedy(8)).tokens;
  GenerationParams params = Greedy(8);
  params.sampling.temperature = 1.5f;
  params.sampling.min_p = 1.0f;
  params.seed = 5;
  EXPECT_EQ(Generate(prompt, params).tokens, greedy);
}

// The cuda-emulated device runs the op's CUDA kernel through the SIMT emulation: the same tokens
// as the CPU twin, in a batch where some sequences have processors and some not.
TEST_F(LogitsProcessorsEngineTest, EmulatedDeviceGivesTheCpuTokens) {
  std::map<SeqId, Outcome> by_device[2];
  const DeviceKind devices[] = {DeviceKind::kCpu, DeviceKind::kCudaEmulated};
  for (int d = 0; d < 2; ++d) {
    auto engine = MakeEngine(devices[d]);
    ASSERT_NE(engine, nullptr);
    ASSERT_THAT(engine->AddRequest(Prompt(7, 1), AllOn(10)), IsOk());
    ASSERT_THAT(engine->AddRequest(Prompt(11, 2), Greedy(10)), IsOk());
    GenerationParams strong = AllOn(10);
    strong.logits_processors.repetition_penalty = 3.0f;
    strong.logits_processors.frequency_penalty = 2.0f;
    ASSERT_THAT(engine->AddRequest(Prompt(5, 3), strong), IsOk());
    by_device[d] = RunToCompletion(*engine);
  }
  ASSERT_EQ(by_device[0].size(), 3u);
  for (const auto& [id, run] : by_device[0]) {
    EXPECT_EQ(by_device[1][id].tokens, run.tokens) << "request " << id;
  }
}

// min_tokens alone: its first steps run the op (eagerly), the later ones none (graphed on the
// emulated device); chunked prefill: the chunks short of the prompt's end sample nothing and build
// no row. The tokens are the CPU's, prefill-first.
TEST_F(LogitsProcessorsEngineTest, ProcessorsThatStopApplyingAndChunkedPrefillKeepTheTokens) {
  const std::vector<int32_t> prompt = Prompt(17, 6);
  const std::vector<int32_t> plain = Generate(prompt, Greedy(10)).tokens;
  GenerationParams params = Greedy(10);
  params.stop_token_ids = {plain[0], plain[1]};
  params.logits_processors.min_tokens = 3;
  const Outcome cpu = Generate(prompt, params);
  ASSERT_GE(cpu.tokens.size(), 3u);
  EXPECT_NE(cpu.tokens[0], plain[0]);
  EXPECT_EQ(Generate(prompt, params, DeviceKind::kCudaEmulated).tokens, cpu.tokens);
  auto chunked = MakeEngine(DeviceKind::kCpu, /*chunked=*/true);
  GenerationParams all_on = AllOn(10);
  auto id = chunked->AddRequest(prompt, all_on);
  ASSERT_THAT(id, IsOk());
  EXPECT_EQ(RunToCompletion(*chunked)[*id].tokens, Generate(prompt, all_on).tokens);
}

// A resumed request (token replay after a dead decode worker) and a prefill hand-off continue as
// the uninterrupted run: the counts are rebuilt from prompt + generated tokens.
TEST_F(LogitsProcessorsEngineTest, ResumedAndHandedOverRequestsContinueTheSameRun) {
  const std::vector<int32_t> prompt = Prompt(15, 5);
  for (float temperature : {0.0f, 1.0f}) {
    GenerationParams params = AllOn(14);
    params.logits_processors.min_tokens = 8;
    params.sampling.temperature = temperature;
    params.sampling.min_p = temperature > 0 ? 0.05f : 0.0f;
    params.seed = 17;
    const std::vector<int32_t> expected = Generate(prompt, params).tokens;
    ASSERT_EQ(expected.size(), 14u);
    for (int k : {1, 5, 10}) {
      SCOPED_TRACE(absl::StrCat("temperature ", temperature, ", ", k, " tokens generated"));
      const std::vector<int32_t> done(expected.begin(), expected.begin() + k);
      auto colocated = MakeEngine();
      auto id = colocated->AddRequest(prompt, params, done);
      ASSERT_THAT(id, IsOk());
      EXPECT_EQ(RunToCompletion(*colocated)[*id].tokens,
                std::vector<int32_t>(expected.begin() + k, expected.end()));

      // Disaggregated: the prefill samples token k, a decode engine takes over with k + 1.
      auto prefill = MakeEngine();
      GenerationParams prefill_params = params;
      prefill_params.hold_kv_after_prefill = true;
      const SeqId p_id = *prefill->AddRequest(prompt, prefill_params, done);
      ASSERT_EQ(RunToCompletion(*prefill)[p_id].tokens, std::vector<int32_t>{expected[k]});
      auto held = prefill->GetHeldKv(p_id);
      ASSERT_THAT(held, IsOk());
      std::vector<int32_t> generated = done;
      generated.push_back(expected[k]);
      auto decode = MakeEngine();
      auto d_id = decode->AdmitPrefilled(prompt, generated, params);
      ASSERT_THAT(d_id, IsOk());
      ASSERT_NO_FATAL_FAILURE(TransferKv(*prefill, *held, *decode, *d_id));
      ASSERT_THAT(decode->StartDecoding(*d_id), IsOk());
      EXPECT_EQ(RunToCompletion(*decode)[*d_id].tokens,
                std::vector<int32_t>(expected.begin() + k + 1, expected.end()));
    }
  }
}

TEST_F(LogitsProcessorsEngineTest, BadOptionsAreInvalidArgumentsNamingTheField) {
  auto engine = MakeEngine();
  GenerationParams params = Greedy(4);
  params.logits_processors.logit_bias = {{96, 1.0f}};
  EXPECT_THAT(engine->AddRequest({1, 2}, params),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("logit_bias: token id 96 is outside the vocabulary")));
  params = Greedy(4);
  params.logits_processors.min_tokens = 5;
  EXPECT_THAT(engine->AddRequest({1, 2}, params),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("min_tokens 5")));
  params = Greedy(4);
  params.logits_processors.repetition_penalty = 0;
  EXPECT_THAT(engine->AddRequest({1, 2}, params),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("repetition_penalty")));
  EXPECT_FALSE(engine->HasWork());
}

}  // namespace
}  // namespace baton::runtime
