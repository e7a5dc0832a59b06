// StepScheduler with steps in flight (step_scheduler.h): a sequence in a step is neither scheduled
// again nor preempted until StepDone; the running decodes are shared out over the steps in flight;
// with one step in flight every decode goes in every step, as before. With a swap pool, a victim
// is swapped out when the pool has room (else recomputed), comes back before anything new is
// admitted, and a step may carry swap copies alone.
#include "runtime/engine/step_scheduler.h"

#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::runtime {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAreArray;

constexpr int kBlockSize = 4;

class StepSchedulerTest : public ::testing::Test {
 protected:
  Sequence* Add(StepScheduler& scheduler, int prompt_len) {
    GenerationParams params;
    params.max_tokens = 100;
    seqs_.push_back(std::make_unique<Sequence>(static_cast<SeqId>(seqs_.size()),
                                               std::vector<int32_t>(prompt_len, 1), params,
                                               kBlockSize));
    scheduler.Add(seqs_.back().get());
    return seqs_.back().get();
  }

  // What the engine does when a step's forward pass is done: the KV is in, a finished prompt or a
  // decode gets its next token.
  static void Finish(StepScheduler& scheduler, const ScheduledStep& step) {
    for (size_t i = 0; i < step.seqs.size(); ++i) {
      Sequence& seq = *step.seqs[i];
      seq.num_computed_tokens += step.q_lens[i];
      seq.block_table.AppendTokens(step.q_lens[i]);
      if (seq.num_uncomputed_tokens() == 0) seq.token_ids.push_back(7);
    }
    scheduler.StepDone(step);
  }

  std::vector<std::unique_ptr<Sequence>> seqs_;
};

TEST_F(StepSchedulerTest, OneStepInFlightDecodesEveryRunningSequence) {
  BlockAllocator allocator(64);
  StepScheduler scheduler({.max_steps_in_flight = 1}, &allocator);
  for (int i = 0; i < 4; ++i) Add(scheduler, 3);
  const ScheduledStep prefill = scheduler.Schedule();
  ASSERT_EQ(prefill.seqs.size(), 4u);
  for (Sequence* seq : prefill.seqs) EXPECT_TRUE(seq->in_step);
  Finish(scheduler, prefill);
  const ScheduledStep decode = scheduler.Schedule();
  EXPECT_EQ(decode.num_decode_seqs, 4);
  EXPECT_THAT(decode.q_lens, ElementsAre(1, 1, 1, 1));
}

TEST_F(StepSchedulerTest, DecodesAreSharedOutOverTheStepsInFlight) {
  BlockAllocator allocator(64);
  StepScheduler scheduler({.max_steps_in_flight = 2}, &allocator);
  for (int i = 0; i < 5; ++i) Add(scheduler, 3);
  Finish(scheduler, scheduler.Schedule());  // the prefill of all five
  // ceil(5 / 2) = 3, then the 2 left; nothing more while both are in flight.
  const ScheduledStep first = scheduler.Schedule();
  const ScheduledStep second = scheduler.Schedule();
  EXPECT_EQ(first.num_decode_seqs, 3);
  EXPECT_EQ(second.num_decode_seqs, 2);
  EXPECT_TRUE(scheduler.Schedule().empty());
  std::vector<Sequence*> both = first.seqs;
  both.insert(both.end(), second.seqs.begin(), second.seqs.end());
  std::vector<Sequence*> all;
  for (const auto& seq : seqs_) all.push_back(seq.get());
  EXPECT_THAT(both, UnorderedElementsAreArray(all));
  // The first step done: its sequences go again, the second's stay out.
  Finish(scheduler, first);
  const ScheduledStep third = scheduler.Schedule();
  EXPECT_EQ(third.seqs, first.seqs);
}

TEST_F(StepSchedulerTest, APromptInAStepIsNotChunkedAgainUntilItIsDone) {
  BlockAllocator allocator(64);
  StepScheduler scheduler({.max_num_batched_tokens = 8, .chunked_prefill = true,
                           .max_steps_in_flight = 2},
                          &allocator);
  Sequence* seq = Add(scheduler, 20);
  const ScheduledStep first = scheduler.Schedule();
  EXPECT_THAT(first.q_lens, ElementsAre(8));
  EXPECT_TRUE(scheduler.Schedule().empty()) << "its next chunk needs this one's KV bookkeeping";
  Finish(scheduler, first);
  const ScheduledStep second = scheduler.Schedule();
  ASSERT_EQ(second.seqs.size(), 1u);
  EXPECT_EQ(second.seqs[0], seq);
  EXPECT_THAT(second.q_lens, ElementsAre(8));
}

TEST_F(StepSchedulerTest, PreemptionPassesOverSequencesInAStep) {
  // 4 blocks: two sequences of 8 tokens fill them; the next decode needs a fifth.
  BlockAllocator allocator(4);
  StepScheduler scheduler({.max_steps_in_flight = 2}, &allocator);
  Sequence* a = Add(scheduler, 8);
  Sequence* b = Add(scheduler, 8);
  Finish(scheduler, scheduler.Schedule());  // both prompts: 4 blocks in use, a token each
  // a's decode needs a block; b is not in a step, so b (the most recent) is preempted for it.
  const ScheduledStep first = scheduler.Schedule();
  EXPECT_THAT(first.seqs, ElementsAre(a));
  EXPECT_EQ(b->status, SeqStatus::kWaiting);
  EXPECT_EQ(b->num_computed_tokens, 0);
  // b's prefill needs 3 blocks and 1 is free; a, in its step, is never the victim.
  EXPECT_TRUE(scheduler.Schedule().empty());
  EXPECT_EQ(a->status, SeqStatus::kRunning);
  EXPECT_TRUE(a->in_step);
  Finish(scheduler, first);
  EXPECT_FALSE(a->in_step);
}

TEST_F(StepSchedulerTest, ASequenceOutOfItsStepCanBeRemoved) {
  BlockAllocator allocator(8);
  StepScheduler scheduler({.max_steps_in_flight = 2}, &allocator);
  Sequence* seq = Add(scheduler, 5);
  const ScheduledStep step = scheduler.Schedule();
  EXPECT_EQ(allocator.num_blocks_used(), 2);
  EXPECT_DEATH(scheduler.Remove(seq), "in_step");
  Finish(scheduler, step);
  scheduler.Remove(seq);
  EXPECT_EQ(allocator.num_blocks_used(), 0);
  EXPECT_FALSE(scheduler.HasWork());
  EXPECT_THAT(scheduler.Schedule().seqs, IsEmpty());
}

TEST_F(StepSchedulerTest, AVictimIsSwappedOutAndComesBackBeforeNewSequences) {
  BlockAllocator allocator(4);
  BlockAllocator swap(4);
  StepScheduler scheduler({}, &allocator, &swap);
  Sequence* a = Add(scheduler, 8);
  Sequence* b = Add(scheduler, 8);
  Finish(scheduler, scheduler.Schedule());  // both prompts: the 4 blocks, a token each
  const std::vector<BlockId> b_blocks = b->block_table.blocks();
  // a's decode needs a fifth block: b, the most recent, is swapped out rather than dropped.
  const ScheduledStep first = scheduler.Schedule();
  EXPECT_THAT(first.seqs, ElementsAre(a));
  EXPECT_EQ(b->status, SeqStatus::kSwapped);
  EXPECT_EQ(b->num_computed_tokens, 8) << "its KV is kept";
  EXPECT_EQ(swap.num_blocks_used(), 2);
  ASSERT_EQ(first.swap_out.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(first.swap_out.src[i], b_blocks[i]);
    EXPECT_EQ(first.swap_out.dst[i], b->block_table.blocks()[i]) << "b's table names swap blocks";
  }
  EXPECT_TRUE(first.swap_in.empty());
  EXPECT_EQ(scheduler.num_swapped(), 1);
  EXPECT_EQ(scheduler.num_swap_outs(), 1);
  EXPECT_EQ(scheduler.num_recomputes(), 0);
  Finish(scheduler, first);
  // b needs its 2 blocks and one for its next token; 1 is free. A new sequence waits behind b even
  // though its prompt would fit.
  Sequence* c = Add(scheduler, 1);
  const ScheduledStep second = scheduler.Schedule();
  EXPECT_THAT(second.seqs, ElementsAre(a));
  EXPECT_EQ(c->status, SeqStatus::kWaiting);
  Finish(scheduler, second);
  scheduler.Remove(a);  // finished: 3 blocks freed
  const ScheduledStep third = scheduler.Schedule();
  EXPECT_THAT(third.seqs, ElementsAre(b)) << "swapped in and decoded in the same step";
  EXPECT_EQ(third.num_decode_seqs, 1);
  ASSERT_EQ(third.swap_in.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(third.swap_in.src[i], first.swap_out.dst[i]);
    EXPECT_EQ(third.swap_in.dst[i], b->block_table.blocks()[i]);
  }
  EXPECT_EQ(b->status, SeqStatus::kRunning);
  EXPECT_EQ(b->block_table.blocks().size(), 3u) << "its 2 and its next token's";
  EXPECT_EQ(swap.num_blocks_used(), 0);
  Finish(scheduler, third);
  // Nothing swapped any more: c is admitted.
  EXPECT_THAT(scheduler.Schedule().seqs, ElementsAre(c));
}

TEST_F(StepSchedulerTest, AVictimTheSwapPoolCannotHoldIsRecomputed) {
  BlockAllocator allocator(4);
  BlockAllocator swap(1);
  StepScheduler scheduler({}, &allocator, &swap);
  Add(scheduler, 8);
  Sequence* b = Add(scheduler, 8);
  Finish(scheduler, scheduler.Schedule());
  const ScheduledStep step = scheduler.Schedule();
  EXPECT_EQ(b->status, SeqStatus::kWaiting);
  EXPECT_EQ(b->num_computed_tokens, 0);
  EXPECT_TRUE(step.swap_out.empty());
  EXPECT_EQ(swap.num_blocks_used(), 0);
  EXPECT_EQ(scheduler.num_swap_outs(), 0);
  EXPECT_EQ(scheduler.num_recomputes(), 1);
}

TEST_F(StepSchedulerTest, AStepMayCarrySwapCopiesAlone) {
  // a (7 tokens) has room for its next token; b (12) fills the rest. With a's decode in flight, b
  // needs a block and is the only sequence out of a step: it swaps itself out, and the step that
  // says so decodes nothing.
  BlockAllocator allocator(5);
  BlockAllocator swap(8);
  StepScheduler scheduler({.max_steps_in_flight = 2}, &allocator, &swap);
  Sequence* a = Add(scheduler, 7);
  Sequence* b = Add(scheduler, 12);
  Finish(scheduler, scheduler.Schedule());
  EXPECT_THAT(scheduler.Schedule().seqs, ElementsAre(a));
  const ScheduledStep copies = scheduler.Schedule();
  EXPECT_THAT(copies.seqs, IsEmpty());
  EXPECT_EQ(copies.swap_out.size(), 3u);
  EXPECT_FALSE(copies.empty());
  EXPECT_EQ(b->status, SeqStatus::kSwapped);
  EXPECT_TRUE(scheduler.HasWork());
}

TEST_F(StepSchedulerTest, RemovingASwappedSequenceFreesItsSwapBlocks) {
  BlockAllocator allocator(4);
  BlockAllocator swap(4);
  StepScheduler scheduler({.chunked_prefill = true}, &allocator, &swap);
  Sequence* a = Add(scheduler, 8);
  Sequence* b = Add(scheduler, 8);
  Finish(scheduler, scheduler.Schedule());
  const ScheduledStep step = scheduler.Schedule();
  ASSERT_EQ(b->status, SeqStatus::kSwapped);
  EXPECT_THAT(step.swap_out.src, Each(::testing::Lt(4)));
  Finish(scheduler, step);
  scheduler.Remove(b);
  EXPECT_EQ(swap.num_blocks_used(), 0);
  EXPECT_EQ(scheduler.num_swapped(), 0);
  scheduler.Remove(a);
  EXPECT_EQ(allocator.num_blocks_used(), 0);
  EXPECT_FALSE(scheduler.HasWork());
}

}  // namespace
}  // namespace baton::runtime
