// Prefix caching in the engine (engine.h, step_scheduler.h): a request whose prompt starts with a
// prefix another request computed takes those blocks from the cache and gives exactly the tokens of
// a cold run, its logits within 1e-5 of the row maximum (f32 KV), on one rank, tp 2, pp 2, chunked
// prefill, bf16 KV and the GPU path under cuda-emulated; the same under preemption and with
// prompts scored (prompt_logprobs), where no cached block is taken.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
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
using testing::Greedy;
using testing::Prompt;

struct Case {
  std::string name;
  int tp = 1;
  int pp = 1;
  bool chunked = false;
  DType kv_dtype = DType::kF32;
  DeviceKind device = DeviceKind::kCpu;
};

struct Answer {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Runs the engine until every request is done; each request's tokens and logits.
std::map<SeqId, Answer> RunToEnd(Engine& engine) {
  std::map<SeqId, Answer> answers;
  while (engine.HasWork()) {
    auto outputs = engine.Step();
    EXPECT_THAT(outputs, IsOk());
    if (!outputs.ok()) break;
    for (TokenOutput& out : *outputs) {
      answers[out.seq_id].tokens.push_back(out.token_id);
      answers[out.seq_id].logits.push_back(std::move(out.logits));
    }
  }
  return answers;
}

void ExpectSameAnswer(const Answer& cached, const Answer& cold, double rel_tol) {
  ASSERT_EQ(cached.tokens, cold.tokens);
  ASSERT_EQ(cached.logits.size(), cold.logits.size());
  for (size_t t = 0; t < cold.logits.size(); ++t) {
    ASSERT_EQ(cached.logits[t].size(), cold.logits[t].size());
    float row_max = 0;
    for (float v : cold.logits[t]) row_max = std::max(row_max, std::abs(v));
    for (size_t v = 0; v < cold.logits[t].size(); ++v) {
      ASSERT_LE(std::abs(cached.logits[t][v] - cold.logits[t][v]), rel_tol * row_max)
          << "token " << t << " logit " << v;
    }
  }
}

class PrefixCachingEngineTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    ASSERT_THAT(testing::WriteTinyModel(dir_.path(), testing::TinyEngineSpec()), IsOk());
  }

  std::unique_ptr<Engine> MakeEngine(bool prefix_caching, size_t kv_cache_bytes = 1 << 20) {
    const Case& c = GetParam();
    auto engine = Engine::Create(EngineConfig{.model_dir = dir_.path(),
                                              .parallel = {.tp_size = c.tp, .pp_size = c.pp},
                                              .device = c.device,
                                              .block_size = 4,
                                              .kv_cache_dtype = c.kv_dtype,
                                              .kv_cache_bytes = kv_cache_bytes,
                                              .max_num_seqs = 8,
                                              .max_num_batched_tokens = c.chunked ? 6 : 64,
                                              .chunked_prefill = c.chunked,
                                              .max_model_len = 64,
                                              .enable_prefix_caching = prefix_caching});
    EXPECT_THAT(engine, IsOk());
    return engine.ok() ? std::move(*engine) : nullptr;
  }

  static GenerationParams WithLogits(int max_tokens) {
    GenerationParams params = Greedy(max_tokens);
    params.return_logits = true;
    return params;
  }

  // bf16 KV: the cached blocks and the cold run's hold the same rounded values only when both
  // computed them in batches of the same shape; the rounding of a different one shows through.
  double Tolerance() const { return GetParam().kv_dtype == DType::kF32 ? 1e-5 : 2e-2; }

  testing::ScopedTempDir dir_;
};

TEST_P(PrefixCachingEngineTest, AFollowUpFromCachedBlocksAnswersAsACold) {
  const std::vector<int32_t> prefix = Prompt(24, 1);  // six blocks of 4
  const std::vector<int32_t> follow_up = Concat(prefix, Prompt(5, 3));
  auto cached = MakeEngine(true);
  auto cold = MakeEngine(false);
  ASSERT_NE(cached, nullptr);
  ASSERT_NE(cold, nullptr);
  ASSERT_THAT(cached->AddRequest(Concat(prefix, Prompt(3, 2)), Greedy(6)), IsOk());
  RunToEnd(*cached);
  const int64_t hits_before = cached->num_prefix_cache_hits();
  auto warm_id = cached->AddRequest(follow_up, WithLogits(8));
  ASSERT_THAT(warm_id, IsOk());
  std::map<SeqId, Answer> warm = RunToEnd(*cached);
  EXPECT_EQ(cached->num_prefix_cache_hits() - hits_before, 24);
  auto cold_id = cold->AddRequest(follow_up, WithLogits(8));
  ASSERT_THAT(cold_id, IsOk());
  std::map<SeqId, Answer> reference = RunToEnd(*cold);
  EXPECT_EQ(cold->num_prefix_cache_queries(), 0);
  ExpectSameAnswer(warm.at(*warm_id), reference.at(*cold_id), Tolerance());
  EXPECT_EQ(cached->allocator().num_blocks_used(), 0);
  EXPECT_GT(cached->allocator().num_blocks_cached(), 6);
}

TEST_P(PrefixCachingEngineTest, TheSamePromptAgainReusesAllButItsLastBlock) {
  const std::vector<int32_t> prompt = Prompt(16, 4);  // four full blocks
  auto cached = MakeEngine(true);
  auto cold = MakeEngine(false);
  ASSERT_NE(cached, nullptr);
  ASSERT_NE(cold, nullptr);
  ASSERT_THAT(cached->AddRequest(prompt, Greedy(4)), IsOk());
  const std::map<SeqId, Answer> first = RunToEnd(*cached);
  auto again = cached->AddRequest(prompt, WithLogits(4));
  ASSERT_THAT(again, IsOk());
  const std::map<SeqId, Answer> second = RunToEnd(*cached);
  EXPECT_EQ(cached->num_prefix_cache_hits(), 12) << "the block of the last prompt token is computed";
  auto reference_id = cold->AddRequest(prompt, WithLogits(4));
  ASSERT_THAT(reference_id, IsOk());
  ExpectSameAnswer(second.at(*again), RunToEnd(*cold).at(*reference_id), Tolerance());
  EXPECT_EQ(first.begin()->second.tokens, second.at(*again).tokens);
}

TEST_P(PrefixCachingEngineTest, ManySharersUnderPreemptionGiveTheColdTokens) {
  // 24 blocks of 4 tokens for eight requests of 20 to 34 tokens sharing a 12-token prefix, four
  // of them arriving while the others run: preemption, recompute from the cache, shared blocks.
  const size_t block_bytes = GetParam().kv_dtype == DType::kF32 ? 1024 : 512;
  auto cached = MakeEngine(true, 24 * block_bytes);
  auto cold = MakeEngine(false, 24 * block_bytes);
  ASSERT_NE(cached, nullptr);
  ASSERT_NE(cold, nullptr);
  auto run = [](Engine& engine) {
    std::map<SeqId, std::vector<int32_t>> tokens;
    const std::vector<int32_t> prefix = Prompt(12, 9);
    for (int i = 0; i < 4; ++i) {
      EXPECT_THAT(engine.AddRequest(Concat(prefix, Prompt(2 + i, i)), Greedy(6 + i)), IsOk());
    }
    for (int step = 0; engine.HasWork(); ++step) {
      auto outputs = engine.Step();
      EXPECT_THAT(outputs, IsOk());
      if (!outputs.ok()) break;
      for (const TokenOutput& out : *outputs) tokens[out.seq_id].push_back(out.token_id);
      if (step < 4) {
        EXPECT_THAT(engine.AddRequest(Concat(prefix, Prompt(3 + step, 20 + step)), Greedy(10)), IsOk());
      }
    }
    EXPECT_EQ(engine.allocator().num_blocks_used(), 0);
    return tokens;
  };
  EXPECT_EQ(run(*cached), run(*cold));
  EXPECT_GT(cached->num_prefix_cache_hits(), 0);
}

TEST_P(PrefixCachingEngineTest, APromptScoredTakesNoCachedBlocks) {
  const std::vector<int32_t> prompt = Prompt(13, 5);
  auto cached = MakeEngine(true);
  ASSERT_NE(cached, nullptr);
  ASSERT_THAT(cached->AddRequest(prompt, Greedy(2)), IsOk());
  RunToEnd(*cached);
  GenerationParams scoring = Greedy(2);
  scoring.num_prompt_logprobs = 1;
  ASSERT_THAT(cached->AddRequest(prompt, scoring), IsOk());
  const int64_t hits = cached->num_prefix_cache_hits();
  while (cached->HasWork()) {
    auto outputs = cached->Step();
    ASSERT_THAT(outputs, IsOk());
    for (const TokenOutput& out : *outputs) {
      if (!out.prompt_logprobs.empty()) {
        ASSERT_EQ(out.prompt_logprobs.size(), prompt.size());
        for (size_t i = 1; i < prompt.size(); ++i) EXPECT_FALSE(out.prompt_logprobs[i].empty()) << i;
      }
    }
  }
  EXPECT_EQ(cached->num_prefix_cache_hits(), hits);
}

// Disaggregated, one rank each: a decode engine whose prefix cache holds a follow-up's history (the
// previous turn's prompt and answer) takes those blocks at admission and receives only the rest;
// the follow-up decodes as a cold engine decodes it.
TEST(PrefixCachingHandOffTest, ADecodeEngineReceivesOnlyTheBlocksItLacks) {
  testing::ScopedTempDir dir;
  ASSERT_THAT(testing::WriteTinyModel(dir.path(), testing::TinyEngineSpec()), IsOk());
  auto make = [&](bool caching) {
    auto engine = Engine::Create(EngineConfig{.model_dir = dir.path(), .block_size = 4, .kv_cache_bytes = 1 << 20,
                                              .max_model_len = 64, .enable_prefix_caching = caching});
    EXPECT_THAT(engine, IsOk());
    return engine.ok() ? std::move(*engine) : nullptr;
  };
  auto prefill = make(true);
  auto decode = make(true);
  auto cold = make(false);
  ASSERT_TRUE(prefill && decode && cold);
  // Hands a prompt from `prefill` to `decode`, copying the blocks the decode cache did not supply;
  // its tokens, and how many blocks the cache supplied.
  auto hand_off = [&](const std::vector<int32_t>& prompt, int* num_cached_blocks) {
    GenerationParams held = Greedy(6);
    held.hold_kv_after_prefill = true;
    const SeqId p_id = *prefill->AddRequest(prompt, held);
    std::vector<int32_t> tokens = RunToEnd(*prefill).at(p_id).tokens;
    auto kv = prefill->GetHeldKv(p_id);
    EXPECT_THAT(kv, IsOk());
    auto d_id = decode->AdmitPrefilled(prompt, tokens, Greedy(6));
    EXPECT_THAT(d_id, IsOk());
    *num_cached_blocks = *decode->NumCachedBlocksOf(*d_id);
    const std::vector<BlockId> dst = *decode->BlocksOf(*d_id);
    EXPECT_EQ(dst.size(), kv->blocks.size());
    for (size_t b = *num_cached_blocks; b < dst.size(); ++b) {
      std::memcpy(decode->ranks().kv_pool(0).BlockData(dst[b]), prefill->ranks().kv_pool(0).BlockData(kv->blocks[b]),
                  prefill->ranks().kv_pool(0).BlockBytes());
    }
    EXPECT_THAT(prefill->ReleaseKv(p_id), IsOk());
    EXPECT_THAT(decode->StartDecoding(*d_id), IsOk());
    const std::vector<int32_t> decoded = RunToEnd(*decode).at(*d_id).tokens;
    tokens.insert(tokens.end(), decoded.begin(), decoded.end());
    return tokens;
  };
  const std::vector<int32_t> first_prompt = Prompt(18, 6);
  int num_cached = -1;
  const std::vector<int32_t> answer = hand_off(first_prompt, &num_cached);
  EXPECT_EQ(num_cached, 0);
  // The decode engine computed the prompt and 5 of the 6 answer tokens: 23 tokens, 5 full blocks.
  std::vector<int32_t> follow_up = Concat(Concat(first_prompt, answer), Prompt(7, 8));
  const std::vector<int32_t> tokens = hand_off(follow_up, &num_cached);
  EXPECT_EQ(num_cached, 5);
  const SeqId cold_id = *cold->AddRequest(follow_up, Greedy(6));
  EXPECT_EQ(tokens, RunToEnd(*cold).at(cold_id).tokens);
  EXPECT_EQ(decode->num_prefix_cache_hits(), 20);
}

// A prefilled request whose leading blocks another running sequence holds needs free blocks for the
// rest only: it is admitted into a pool too full for its whole KV (with caching off it waits).
TEST(PrefixCachingHandOffTest, AdmissionCountsTheCachedBlocksOthersHold) {
  testing::ScopedTempDir dir;
  ASSERT_THAT(testing::WriteTinyModel(dir.path(), testing::TinyEngineSpec()), IsOk());
  for (bool caching : {true, false}) {
    SCOPED_TRACE(::testing::Message() << "caching " << caching);
    auto engine = Engine::Create(EngineConfig{.model_dir = dir.path(), .block_size = 4,
                                              .kv_cache_bytes = 1 << 16, .max_model_len = 256,
                                              .enable_prefix_caching = caching});
    ASSERT_THAT(engine, IsOk());
    const int num_blocks = (*engine)->allocator().num_blocks();
    ASSERT_GE(num_blocks, 8);
    // A runs with a prompt of num_blocks - 3 full blocks: after its prefill it holds them (cached),
    // leaving 3 free.
    const std::vector<int32_t> prompt = Prompt(4 * (num_blocks - 3), 3);
    ASSERT_THAT((*engine)->AddRequest(prompt, Greedy(8)), IsOk());
    ASSERT_THAT((*engine)->Step(), IsOk());
    ASSERT_EQ((*engine)->allocator().num_blocks_free(), 3);
    // B: A's prompt and 2 more tokens, prefilled elsewhere: its KV needs num_blocks - 2 blocks.
    const std::vector<int32_t> follow_up = Concat(prompt, {5, 6});
    EXPECT_EQ((*engine)->CanAdmitPrefilled(follow_up, {7}), caching);
    if (caching) {
      auto id = (*engine)->AdmitPrefilled(follow_up, {7}, Greedy(4));
      ASSERT_THAT(id, IsOk());
      EXPECT_EQ(*(*engine)->NumCachedBlocksOf(*id), num_blocks - 3);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, PrefixCachingEngineTest,
    ::testing::Values(Case{.name = "one_rank"}, Case{.name = "tp2", .tp = 2}, Case{.name = "pp2", .pp = 2},
                      Case{.name = "chunked", .chunked = true},
                      Case{.name = "bf16_kv", .kv_dtype = DType::kBF16},
                      Case{.name = "cuda_emulated_tp2_chunked", .tp = 2, .chunked = true,
                           .device = DeviceKind::kCudaEmulated}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace baton::runtime
