#include "runtime/tokenizer/stop_matcher.h"

#include "gtest/gtest.h"

namespace baton::runtime {
namespace {

TEST(StopMatcherTest, NoStopStringsPassesEverythingThrough) {
  StopMatcher matcher({});
  EXPECT_EQ(matcher.Feed("hello"), "hello");
  EXPECT_EQ(matcher.Feed(" world"), " world");
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.Flush(), "");
}

TEST(StopMatcherTest, StopStringSplitAcrossChunksIsNeverEmitted) {
  StopMatcher matcher({"</end>"});
  EXPECT_EQ(matcher.Feed("abc</"), "abc");
  EXPECT_EQ(matcher.Feed("en"), "");
  EXPECT_EQ(matcher.Feed("d>tail"), "");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.Feed("more"), "");
}

TEST(StopMatcherTest, FalsePrefixIsReleasedWhenDisproved) {
  StopMatcher matcher({"STOP"});
  EXPECT_EQ(matcher.Feed("xST"), "x");
  EXPECT_EQ(matcher.Feed("AY"), "STAY");
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.Feed("ST"), "");
  EXPECT_EQ(matcher.Flush(), "ST");
}

TEST(StopMatcherTest, EarliestOfSeveralStopStringsWins) {
  StopMatcher matcher({"bb", "a"});
  EXPECT_EQ(matcher.Feed("xxbbya"), "xx");
  EXPECT_TRUE(matcher.stopped());
}

TEST(StopMatcherTest, IncludeStopEmitsTheStopStringThatEnds) {
  StopMatcher matcher({"bb", "a"}, /*include_stop=*/true);
  EXPECT_EQ(matcher.Feed("xxb"), "xx");  // "b" may start "bb": held back
  EXPECT_EQ(matcher.Feed("bya"), "bb");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.Feed("more"), "");
}

// vLLM's min_tokens: a stop string that completes before the generation may stop does not stop
// it; one that starts there and completes after does.
TEST(StopMatcherTest, OnlyAStopStringEndingWhereStoppingIsAllowedStops) {
  StopMatcher matcher({"ab"});
  EXPECT_EQ(matcher.Feed("xab", /*may_stop=*/false), "xab");
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.Feed("a", /*may_stop=*/false), "");  // a possible prefix is still held
  EXPECT_EQ(matcher.Feed("bc"), "");
  EXPECT_TRUE(matcher.stopped());

  StopMatcher late({"ab"});
  EXPECT_EQ(late.Feed("ab", /*may_stop=*/false), "ab");
  EXPECT_EQ(late.Feed("c"), "c");  // "ab" completed before: not a stop
  EXPECT_EQ(late.Feed("zab"), "z");
  EXPECT_TRUE(late.stopped());
}

TEST(StopMatcherTest, EmptyStopStringIsIgnored) {
  StopMatcher matcher({""});
  EXPECT_EQ(matcher.Feed("abc"), "abc");
  EXPECT_FALSE(matcher.stopped());
}

}  // namespace
}  // namespace baton::runtime
