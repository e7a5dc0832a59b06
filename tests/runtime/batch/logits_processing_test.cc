// TokenHistory: the logits processors' row of a sequence from its tokens, counted incrementally,
// equals one counted from scratch, and lists only what a processor touches.
#include "runtime/batch/logits_processing.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::kernels {
// Found by ADL from std::vector's ==.
bool operator==(const LogitsTokenEntry& a, const LogitsTokenEntry& b) {
  return a.token_id == b.token_id && a.output_count == b.output_count && a.bias == b.bias &&
         a.flags == b.flags;
}
}  // namespace baton::kernels

namespace baton::runtime {
namespace {

using kernels::kLogitsTokenSeen;
using kernels::kLogitsTokenStop;
using kernels::LogitsTokenEntry;

TEST(TokenHistoryTest, CountsOutputAndMarksPromptAndStopsAndBias) {
  LogitsProcessorOptions options;
  options.repetition_penalty = 1.2f;
  options.frequency_penalty = 0.5f;
  options.logit_bias = {{4, 2.0f}, {8, -1.0f}};
  options.min_tokens = 4;
  const std::vector<int32_t> tokens = {1, 2, 2, /*generated:*/ 3, 2, 3};
  TokenHistory history;
  history.Update(tokens, /*num_prompt_tokens=*/3);
  LogitsProcessing row;
  history.Fill(options, /*stop_token_ids=*/{8, 9}, /*num_generated=*/3, &row);
  const std::vector<LogitsTokenEntry> want = {
      {.token_id = 1, .output_count = 0, .bias = 0, .flags = kLogitsTokenSeen},
      {.token_id = 2, .output_count = 1, .bias = 0, .flags = kLogitsTokenSeen},
      {.token_id = 3, .output_count = 2, .bias = 0, .flags = kLogitsTokenSeen},
      {.token_id = 4, .output_count = 0, .bias = 2.0f, .flags = 0},
      {.token_id = 8, .output_count = 0, .bias = -1.0f, .flags = kLogitsTokenStop},
      {.token_id = 9, .output_count = 0, .bias = 0, .flags = kLogitsTokenStop},
  };
  EXPECT_EQ(row.entries, want);
  EXPECT_EQ(row.num_generated, 3);
  EXPECT_EQ(row.min_tokens, 4);
  EXPECT_EQ(row.repetition_penalty, 1.2f);

  // Once min_tokens are generated the stop tokens drop out; without a repetition penalty the
  // prompt-only tokens do too.
  options.repetition_penalty = 1;
  history.Fill(options, {8, 9}, /*num_generated=*/4, &row);
  std::vector<int32_t> ids;
  for (const LogitsTokenEntry& e : row.entries) ids.push_back(e.token_id);
  EXPECT_THAT(ids, ::testing::ElementsAre(2, 3, 4, 8));
}

TEST(TokenHistoryTest, IncrementalEqualsFromScratch) {
  LogitsProcessorOptions options;
  options.presence_penalty = 1;
  options.repetition_penalty = 1.5f;
  std::vector<int32_t> tokens = {5, 6, 5};
  TokenHistory incremental;
  incremental.Update(tokens, 3);
  for (int32_t t : {6, 7, 7, 5, 9}) {
    tokens.push_back(t);
    incremental.Update(tokens, 3);
    TokenHistory scratch;
    scratch.Update(tokens, 3);
    LogitsProcessing a, b;
    incremental.Fill(options, {}, static_cast<int>(tokens.size()) - 3, &a);
    scratch.Fill(options, {}, static_cast<int>(tokens.size()) - 3, &b);
    EXPECT_EQ(a.entries, b.entries) << "after " << tokens.size() << " tokens";
  }
}

TEST(TokenHistoryTest, NeutralOptionsNeedNothing) {
  LogitsProcessorOptions options;
  EXPECT_FALSE(NeedsLogitsProcessing(options, 0));
  options.min_tokens = 2;
  EXPECT_TRUE(NeedsLogitsProcessing(options, 1));
  EXPECT_FALSE(NeedsLogitsProcessing(options, 2));
  options.logit_bias = {{1, 0.5f}};
  EXPECT_TRUE(NeedsLogitsProcessing(options, 2));
}

}  // namespace
}  // namespace baton::runtime
