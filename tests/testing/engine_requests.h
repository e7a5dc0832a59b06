// What the engine tests ask of an Engine, written once: deterministic prompts, greedy parameters, a
// run of staggered requests, and the KV copy a transport makes between two one-rank engines in a
// prefill -> decode hand-off.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/engine/engine.h"
#include "tests/testing/status_matchers.h"

namespace baton::testing {

// `len` ids in [0, vocab_size), a different sequence for each salt.
inline std::vector<int32_t> Prompt(int len, int salt, int vocab_size = 96) {
  std::vector<int32_t> ids(len);
  for (int i = 0; i < len; ++i) ids[i] = (i * 37 + salt * 11 + 5) % vocab_size;
  return ids;
}

// Greedy, exactly max_tokens tokens (EOS does not end it).
inline runtime::GenerationParams Greedy(int max_tokens) {
  runtime::GenerationParams params;
  params.max_tokens = max_tokens;
  params.ignore_eos = true;
  return params;
}

// Six greedy requests of 17 to 37 tokens (prompt 5 + 3i, 12 + i generated), three at the start and
// one more after each of the first three steps, run to the end; each sequence's tokens. after_step
// (optional) sees the engine after every step. Every block is free again at the end.
inline std::map<runtime::SeqId, std::vector<int32_t>> RunSixStaggeredRequests(
    runtime::Engine& engine, const std::function<void(runtime::Engine&)>& after_step = {}) {
  std::map<runtime::SeqId, std::vector<int32_t>> tokens;
  int next = 0;
  auto add = [&] {
    const auto id = engine.AddRequest(Prompt(5 + 3 * next, next), Greedy(12 + next));
    EXPECT_THAT(id, ::absl_testing::IsOk());
    ++next;
  };
  for (int i = 0; i < 3; ++i) add();
  for (int step = 0; engine.HasWork(); ++step) {
    auto outputs = engine.Step();
    EXPECT_THAT(outputs, ::absl_testing::IsOk());
    if (!outputs.ok()) break;
    for (const runtime::TokenOutput& out : *outputs) tokens[out.seq_id].push_back(out.token_id);
    if (after_step) after_step(engine);
    if (step < 3) add();
  }
  EXPECT_EQ(engine.allocator().num_blocks_used(), 0);
  return tokens;
}

// What one request produced when its engine ran to the end: its tokens and how it finished.
struct RunOutcome {
  std::vector<int32_t> tokens;
  runtime::FinishReason finish = runtime::FinishReason::kNone;
};

// Steps `engine` until it has no work; each sequence's outcome.
inline std::map<runtime::SeqId, RunOutcome> RunToCompletion(runtime::Engine& engine) {
  std::map<runtime::SeqId, RunOutcome> runs;
  while (engine.HasWork()) {
    auto outputs = engine.Step();
    EXPECT_THAT(outputs, ::absl_testing::IsOk());
    if (!outputs.ok()) break;
    for (const runtime::TokenOutput& out : *outputs) {
      runs[out.seq_id].tokens.push_back(out.token_id);
      runs[out.seq_id].finish = out.finish_reason;
    }
  }
  return runs;
}

// The held blocks of `prefill` into the blocks `decode` admitted for `seq`.
inline void TransferKv(const runtime::Engine& prefill, const runtime::Engine::HeldKv& held,
                       runtime::Engine& decode, runtime::SeqId seq) {
  auto dst = decode.BlocksOf(seq);
  ASSERT_THAT(dst, ::absl_testing::IsOk());
  ASSERT_EQ(dst->size(), held.blocks.size());
  for (size_t b = 0; b < dst->size(); ++b) {
    std::memcpy(decode.ranks().kv_pool(0).BlockData((*dst)[b]),
                prefill.ranks().kv_pool(0).BlockData(held.blocks[b]),
                prefill.ranks().kv_pool(0).BlockBytes());
  }
}

}  // namespace baton::testing
