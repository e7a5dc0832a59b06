#include "runtime/tokenizer/text_stream.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/runtime/tokenizer/tokenizer_test_util.h"

namespace baton::runtime {
namespace {

using ::testing::ElementsAre;
using testing::Gpt2StyleJson;
using testing::LoadTokenizer;

// Byte-level ids equal byte values in this vocab: the ids of "ab" are {'a', 'b'}.
std::vector<int32_t> Ids(const std::string& text) {
  std::vector<int32_t> ids;
  for (const char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

// Appends `ids` one by one (stopping once the stream stops, as its callers do), then Finish unless
// stopped; returns every piece of text.
std::vector<std::string> Stream(TextStream& stream, const std::vector<int32_t>& ids) {
  std::vector<std::string> pieces;
  for (const int32_t id : ids) {
    if (stream.stopped()) break;
    pieces.push_back(stream.Append(id));
  }
  if (!stream.stopped()) pieces.push_back(stream.Finish());
  return pieces;
}

TEST(TextStreamTest, WithoutStopStringsTheTextIsTheDecodedIds) {
  auto tokenizer = LoadTokenizer(Gpt2StyleJson());
  TextStream stream(*tokenizer, {}, {});
  EXPECT_THAT(Stream(stream, Ids("hi!")), ElementsAre("h", "i", "!", ""));
  EXPECT_FALSE(stream.stopped());
}

TEST(TextStreamTest, StopStringEndsTheTextBeforeIt) {
  auto tokenizer = LoadTokenizer(Gpt2StyleJson());
  TextStream stream(*tokenizer, {}, {"END"});
  // "E" and "N" are held back until "D" decides them; the stop string is never emitted.
  EXPECT_THAT(Stream(stream, Ids("abENDcd")), ElementsAre("a", "b", "", "", ""));
  EXPECT_TRUE(stream.stopped());
  EXPECT_EQ(stream.Append('x'), "");
  EXPECT_EQ(stream.Finish(), "");
}

TEST(TextStreamTest, FinishReleasesAPrefixThatNeverCompleted) {
  auto tokenizer = LoadTokenizer(Gpt2StyleJson());
  TextStream stream(*tokenizer, {}, {"END"});
  EXPECT_THAT(Stream(stream, Ids("abEN")), ElementsAre("a", "b", "", "", "EN"));
  EXPECT_FALSE(stream.stopped());
}

TEST(TextStreamTest, StopStringCanCompleteInTheDetokenizersTail) {
  auto tokenizer = LoadTokenizer(Gpt2StyleJson());
  const std::string emoji = "\xF0\x9F\x98\x80";  // four byte-level tokens, one character
  TextStream stream(*tokenizer, {}, {"a" + emoji});
  // The emoji's last byte completes the character and with it the stop string.
  EXPECT_THAT(Stream(stream, Ids("xa" + emoji)), ElementsAre("x", "", "", "", "", ""));
  EXPECT_TRUE(stream.stopped());
}

// "bcde" would start earlier, but "cd" completes first; text held for "bcde" is released up to "cd".
TEST(TextStreamTest, FirstStopStringToCompleteWins) {
  auto tokenizer = LoadTokenizer(Gpt2StyleJson());
  TextStream stream(*tokenizer, {}, {"cd", "bcde"});
  std::string text;
  for (const std::string& piece : Stream(stream, Ids("abcdef"))) text += piece;
  EXPECT_EQ(text, "ab");
  EXPECT_TRUE(stream.stopped());
}

}  // namespace
}  // namespace baton::runtime
