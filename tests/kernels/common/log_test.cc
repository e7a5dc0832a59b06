#include "kernels/common/log.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton {
namespace {

TEST(LogTest, ParsesTheFourLevels) {
  EXPECT_EQ(ParseLogLevel("debug"), LogLevel::kDebug);
  EXPECT_EQ(ParseLogLevel("info"), LogLevel::kInfo);
  EXPECT_EQ(ParseLogLevel("warning"), LogLevel::kWarning);
  EXPECT_EQ(ParseLogLevel("error"), LogLevel::kError);
  EXPECT_EQ(ParseLogLevel("INFO"), std::nullopt);
  EXPECT_EQ(ParseLogLevel("warn"), std::nullopt);
  for (LogLevel level : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning, LogLevel::kError}) {
    EXPECT_EQ(ParseLogLevel(LogLevelName(level)), level);
  }
}

TEST(LogTest, WritesPrefixedLinesAtOrAboveTheThreshold) {
  InitLogging("baton test", LogLevel::kWarning);
  testing::internal::CaptureStderr();
  LogDebug("d");
  LogInfo("i");
  LogWarning("w");
  LogError("e");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "baton test: w\nbaton test: e\n");
  InitLogging("baton test", LogLevel::kDebug);
  testing::internal::CaptureStderr();
  LogDebug("d");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "baton test: d\n");
  InitLogging("baton", LogLevel::kInfo);
  EXPECT_FALSE(LogEnabled(LogLevel::kDebug));
  EXPECT_TRUE(LogEnabled(LogLevel::kInfo));
}

TEST(LogTest, QuotesValuesThatWouldBreakKeyValueParsing) {
  EXPECT_EQ(LogValue("req-1"), "req-1");
  EXPECT_EQ(LogValue(""), "\"\"");
  EXPECT_EQ(LogValue("no live decode worker"), "\"no live decode worker\"");
  EXPECT_EQ(LogValue("a=b"), "\"a=b\"");
  EXPECT_EQ(LogValue("say \"hi\"\\"), "\"say \\\"hi\\\"\\\\\"");
  EXPECT_EQ(LogValue("two\nlines\t\x01"), "\"two\\nlines\\t\\x01\"");
}

}  // namespace
}  // namespace baton
