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

TEST(StopMatcherTest, EmptyStopStringIsIgnored) {
  StopMatcher matcher({""});
  EXPECT_EQ(matcher.Feed("abc"), "abc");
  EXPECT_FALSE(matcher.stopped());
}

}  // namespace
}  // namespace baton::runtime
