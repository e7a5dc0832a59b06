// StepScheduler with prefix caching (step_scheduler.h): admission takes the longest cached run of a
// sequence's full blocks and computes the rest, never the block of its last token; a step's full
// blocks are cached when it is done; shared blocks keep their reference counts right through
// preemption (recompute and swap), cancellation and prompt scoring.
#include <memory>
#include <numeric>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/engine/step_scheduler.h"

namespace baton::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int kBlockSize = 4;
const BlockHash kRoot = PrefixCacheRoot("test model");

std::vector<int32_t> Tokens(int first, int n) {
  std::vector<int32_t> tokens(n);
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class PrefixCachingSchedulerTest : public ::testing::Test {
 protected:
  static StepSchedulerConfig Config(StepSchedulerConfig config = {}) {
    config.prefix_caching = true;
    config.prefix_cache_root = kRoot;
    return config;
  }

  Sequence* Add(StepScheduler& scheduler, std::vector<int32_t> prompt, GenerationParams params = {}) {
    params.max_tokens = 100;
    seqs_.push_back(std::make_unique<Sequence>(static_cast<SeqId>(seqs_.size()), std::move(prompt),
                                               params, kBlockSize));
    scheduler.Add(seqs_.back().get());
    return seqs_.back().get();
  }

  // What the engine does when a step's forward pass is done well: the KV is in, a finished prompt
  // or a decode gets its next token, and the full blocks are cached.
  static void Finish(StepScheduler& scheduler, const ScheduledStep& step) {
    for (size_t i = 0; i < step.seqs.size(); ++i) {
      Sequence& seq = *step.seqs[i];
      seq.num_computed_tokens += step.q_lens[i];
      seq.block_table.AppendTokens(step.q_lens[i]);
      if (seq.num_uncomputed_tokens() == 0) seq.token_ids.push_back(7);
    }
    scheduler.StepDone(step);
    scheduler.CacheComputedBlocks(step);
  }

  std::vector<std::unique_ptr<Sequence>> seqs_;
};

TEST_F(PrefixCachingSchedulerTest, ALaterPromptComputesOnlyWhatFollowsTheCachedPrefix) {
  BlockAllocator allocator(16);
  StepScheduler scheduler(Config(), &allocator);
  Sequence* a = Add(scheduler, Tokens(1, 10));
  Finish(scheduler, scheduler.Schedule());
  const std::vector<BlockId> a_blocks = a->block_table.blocks();
  EXPECT_EQ(allocator.num_blocks_cached(), 2) << "two full blocks; the partial third is never shared";
  scheduler.Remove(a);  // finished: its blocks stay cached, owned by no one
  EXPECT_EQ(allocator.num_blocks_free(), 16);

  Sequence* b = Add(scheduler, Concat(Tokens(1, 8), Tokens(100, 3)));
  const ScheduledStep step = scheduler.Schedule();
  ASSERT_THAT(step.seqs, ElementsAre(b));
  EXPECT_THAT(step.q_lens, ElementsAre(3));
  EXPECT_EQ(b->num_computed_tokens, 8);
  ASSERT_EQ(b->block_table.blocks().size(), 3u);
  EXPECT_EQ(b->block_table.blocks()[0], a_blocks[0]);
  EXPECT_EQ(b->block_table.blocks()[1], a_blocks[1]);
  EXPECT_EQ(allocator.refcount(a_blocks[0]), 1);
  EXPECT_EQ(scheduler.num_prefix_cache_queries(), 10 + 11);
  EXPECT_EQ(scheduler.num_prefix_cache_hits(), 8);
}

TEST_F(PrefixCachingSchedulerTest, TheLastPromptTokenIsAlwaysComputed) {
  BlockAllocator allocator(16);
  StepScheduler scheduler(Config(), &allocator);
  Add(scheduler, Tokens(1, 8));
  Finish(scheduler, scheduler.Schedule());
  EXPECT_EQ(allocator.num_blocks_cached(), 2);
  // Both blocks are cached, but the second holds the last token, whose logits are needed.
  Sequence* again = Add(scheduler, Tokens(1, 8));
  const ScheduledStep step = scheduler.Schedule();
  ASSERT_THAT(step.seqs, ElementsAre(again));
  EXPECT_THAT(step.q_lens, ElementsAre(4));
  EXPECT_EQ(again->num_computed_tokens, 4);
}

TEST_F(PrefixCachingSchedulerTest, SequencesThatScoreTheirPromptTakeNoCachedBlocks) {
  BlockAllocator allocator(16);
  StepScheduler scheduler(Config(), &allocator);
  Add(scheduler, Tokens(1, 9));
  Finish(scheduler, scheduler.Schedule());
  GenerationParams scoring;
  scoring.num_prompt_logprobs = 0;
  Sequence* scored = Add(scheduler, Tokens(1, 9), scoring);
  const ScheduledStep step = scheduler.Schedule();
  ASSERT_THAT(step.seqs, ElementsAre(scored));
  EXPECT_THAT(step.q_lens, ElementsAre(9));
  EXPECT_EQ(scheduler.num_prefix_cache_hits(), 0);
}

TEST_F(PrefixCachingSchedulerTest, ChunkedPrefillTakesTheHitThenChunksTheRest) {
  BlockAllocator allocator(16);
  StepScheduler scheduler(Config({.max_num_batched_tokens = 4, .chunked_prefill = true}), &allocator);
  Sequence* a = Add(scheduler, Tokens(1, 12));
  for (int i = 0; i < 3; ++i) Finish(scheduler, scheduler.Schedule());
  ASSERT_EQ(a->num_generated_tokens(), 1);
  EXPECT_EQ(allocator.num_blocks_cached(), 3);
  scheduler.Remove(a);
  Sequence* b = Add(scheduler, Concat(Tokens(1, 12), Tokens(50, 6)));
  const ScheduledStep first = scheduler.Schedule();
  ASSERT_THAT(first.seqs, ElementsAre(b));
  EXPECT_THAT(first.q_lens, ElementsAre(4));
  EXPECT_EQ(b->num_computed_tokens, 12);
  Finish(scheduler, first);
  const ScheduledStep second = scheduler.Schedule();
  EXPECT_THAT(second.q_lens, ElementsAre(2));
}

TEST_F(PrefixCachingSchedulerTest, ARecomputedVictimFindsItsOwnBlocks) {
  BlockAllocator allocator(7);
  StepScheduler scheduler(Config(), &allocator);
  Sequence* a = Add(scheduler, Tokens(1, 8));
  Sequence* b = Add(scheduler, Tokens(100, 8));
  Finish(scheduler, scheduler.Schedule());  // both prompts: 4 blocks, all cached
  for (int i = 0; i < 4; ++i) Finish(scheduler, scheduler.Schedule());  // 12 computed tokens each
  // Position 12 of each needs a fourth block; one is left: b, the most recent, is recomputed.
  const ScheduledStep step = scheduler.Schedule();
  EXPECT_THAT(step.seqs, ElementsAre(a));
  EXPECT_EQ(scheduler.num_recomputes(), 1);
  EXPECT_EQ(b->status, SeqStatus::kWaiting);
  Finish(scheduler, step);
  scheduler.Remove(a);
  // b's three full blocks, prompt and generated tokens alike, come back from the cache.
  const ScheduledStep again = scheduler.Schedule();
  ASSERT_THAT(again.seqs, ElementsAre(b));
  EXPECT_EQ(b->num_computed_tokens, 12);
  EXPECT_THAT(again.q_lens, ElementsAre(1));
}

TEST_F(PrefixCachingSchedulerTest, ASwappedOutSharedBlockStaysValidForItsOtherOwner) {
  BlockAllocator allocator(6);
  BlockAllocator swap(8);
  StepScheduler scheduler(Config(), &allocator, &swap);
  Sequence* a = Add(scheduler, Tokens(1, 8));
  Finish(scheduler, scheduler.Schedule());
  Sequence* b = Add(scheduler, Concat(Tokens(1, 8), Tokens(40, 1)));  // shares a's two blocks
  Finish(scheduler, scheduler.Schedule());
  const std::vector<BlockId> shared = {a->block_table.blocks()[0], a->block_table.blocks()[1]};
  EXPECT_EQ(b->block_table.blocks()[0], shared[0]);
  EXPECT_EQ(allocator.refcount(shared[0]), 2);
  // Decode until b must give way: it is swapped out, and its hold on the shared blocks goes.
  for (int i = 0; i < 50 && scheduler.num_swapped() == 0; ++i) Finish(scheduler, scheduler.Schedule());
  ASSERT_EQ(b->status, SeqStatus::kSwapped);
  EXPECT_EQ(allocator.refcount(shared[0]), 1);
  EXPECT_EQ(allocator.refcount(shared[1]), 1);
  const std::vector<BlockId> found = allocator.FindCached(b->block_hashes);
  ASSERT_GE(found.size(), 2u);
  EXPECT_EQ(found[0], shared[0]);
  EXPECT_EQ(found[1], shared[1]);
  EXPECT_EQ(a->block_table.blocks()[0], shared[0]) << "a still reads them";
}

TEST_F(PrefixCachingSchedulerTest, CancellingOneOwnerLeavesTheOtherItsBlocks) {
  BlockAllocator allocator(16);
  StepScheduler scheduler(Config(), &allocator);
  Sequence* a = Add(scheduler, Tokens(1, 9));
  Finish(scheduler, scheduler.Schedule());
  Sequence* b = Add(scheduler, Tokens(1, 9));
  Finish(scheduler, scheduler.Schedule());
  const BlockId shared = a->block_table.blocks()[0];
  ASSERT_EQ(b->block_table.blocks()[0], shared);
  scheduler.Remove(a);
  EXPECT_EQ(allocator.refcount(shared), 1);
  scheduler.Remove(b);
  EXPECT_EQ(allocator.refcount(shared), 0);
  EXPECT_THAT(allocator.FindCached(std::vector<BlockHash>{b->block_hashes[0]}), ElementsAre(shared));
  EXPECT_EQ(allocator.num_blocks_free(), 16);
}

TEST_F(PrefixCachingSchedulerTest, AnUnadmittedSequenceGivesItsHitBack) {
  BlockAllocator allocator(4);
  StepScheduler scheduler(Config(), &allocator);
  Sequence* a = Add(scheduler, Tokens(1, 8));
  Finish(scheduler, scheduler.Schedule());  // 2 blocks, cached and held
  Sequence* filler = Add(scheduler, Tokens(200, 5));  // takes the two plain free blocks
  Sequence* b = Add(scheduler, Concat(Tokens(1, 8), Tokens(60, 9)));
  scheduler.Remove(a);
  // b's hit takes a's two cached blocks; the three it still needs are not there.
  ScheduledStep step = scheduler.Schedule();
  EXPECT_THAT(step.seqs, ElementsAre(filler));
  EXPECT_EQ(b->num_computed_tokens, 0);
  EXPECT_THAT(b->block_table.blocks(), IsEmpty());
  EXPECT_EQ(allocator.num_blocks_cached(), 2) << "nothing evicted for a sequence that did not get in";
}

TEST_F(PrefixCachingSchedulerTest, OffMeansNoLookupsAndNoCounts) {
  BlockAllocator allocator(16);
  StepScheduler scheduler({}, &allocator);
  Add(scheduler, Tokens(1, 9));
  Finish(scheduler, scheduler.Schedule());
  Sequence* b = Add(scheduler, Tokens(1, 9));
  Finish(scheduler, scheduler.Schedule());
  EXPECT_EQ(b->num_computed_tokens, 9);
  EXPECT_EQ(allocator.num_blocks_cached(), 0);
  EXPECT_EQ(scheduler.num_prefix_cache_queries(), 0);
}

}  // namespace
}  // namespace baton::runtime
