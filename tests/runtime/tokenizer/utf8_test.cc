#include "runtime/tokenizer/utf8.h"

#include <string>

#include "gtest/gtest.h"

namespace baton::runtime::utf8 {
namespace {

const std::string kFffd(kReplacementChar);

std::string Lossy(std::string_view bytes, bool* truncated = nullptr) {
  std::string out;
  const bool ends_truncated = AppendLossy(bytes, &out);
  if (truncated != nullptr) *truncated = ends_truncated;
  return out;
}

TEST(Utf8Test, ValidTextIsUnchanged) {
  const std::string text = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";  // a é € 😀
  EXPECT_TRUE(IsValid(text));
  bool truncated = true;
  EXPECT_EQ(Lossy(text, &truncated), text);
  EXPECT_FALSE(truncated);
}

// Expected values are those of Python's bytes.decode("utf-8", "replace").
TEST(Utf8Test, ReplacesEachMaximalInvalidSubpartByOneReplacementChar) {
  EXPECT_EQ(Lossy("\xE2\x82" "A"), kFffd + "A");
  EXPECT_EQ(Lossy("\xC0\x80"), kFffd + kFffd);             // overlong lead, lone continuation
  EXPECT_EQ(Lossy("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // a surrogate
  EXPECT_EQ(Lossy("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // above U+10FFFF
  EXPECT_EQ(Lossy("\xE0\x80\x80"), kFffd + kFffd + kFffd);
  EXPECT_EQ(Lossy("a\x80" "b"), "a" + kFffd + "b");
  EXPECT_EQ(Lossy("\xF1\x80\x80\xE2\x82\xAC"), kFffd + "\xE2\x82\xAC");
  EXPECT_EQ(Lossy("\xFF\xFE"), kFffd + kFffd);
  EXPECT_FALSE(IsValid("\xED\xA0\x80"));
}

TEST(Utf8Test, ReportsATruncatedLastCharacter) {
  bool truncated = false;
  EXPECT_EQ(Lossy("a\xF0\x9F\x98", &truncated), "a" + kFffd);
  EXPECT_TRUE(truncated);
  EXPECT_TRUE(EndsWithTruncatedSequence("a\xF0\x9F\x98"));
  EXPECT_TRUE(EndsWithTruncatedSequence("\xE2"));
  EXPECT_FALSE(EndsWithTruncatedSequence("\xF0\x9F\x98\x80"));
  EXPECT_FALSE(EndsWithTruncatedSequence("\xE2\x41"));  // already invalid, not truncated
  EXPECT_FALSE(EndsWithTruncatedSequence("\x80\x80"));
  EXPECT_FALSE(EndsWithTruncatedSequence(""));
  Lossy("\xE2\x41", &truncated);
  EXPECT_FALSE(truncated);
}

TEST(Utf8Test, DecodesAndEncodesCodepoints) {
  for (char32_t c : {U'a', U'\u00E9', U'\u20AC', U'\U0001F600', U'\u2581'}) {
    std::string encoded;
    AppendCodepoint(c, &encoded);
    EXPECT_TRUE(IsValid(encoded));
    EXPECT_EQ(encoded.size(), CharLength(static_cast<uint8_t>(encoded[0])));
    size_t pos = 0;
    EXPECT_EQ(DecodeAt(encoded, &pos), c);
    EXPECT_EQ(pos, encoded.size());
  }
}

}  // namespace
}  // namespace baton::runtime::utf8
