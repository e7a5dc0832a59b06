#include "runtime/tokenizer/incremental_detokenizer.h"

#include <random>
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
using testing::SentencePieceStyleJson;

const std::string kEmoji = "\xF0\x9F\x98\x80";  // U+1F600, four bytes
const std::string kFffd = "\xEF\xBF\xBD";

// Feeds `ids` one by one; returns each Step's output and then Flush's.
std::vector<std::string> Stream(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                                bool skip_special_tokens,
                                std::span<const int32_t> context_ids = {}) {
  IncrementalDetokenizer detokenizer(tokenizer, skip_special_tokens, context_ids);
  std::vector<std::string> pieces;
  for (const int32_t id : ids) pieces.push_back(detokenizer.Step(id));
  pieces.push_back(detokenizer.Flush());
  return pieces;
}

std::string Join(const std::vector<std::string>& pieces) {
  std::string text;
  for (const std::string& piece : pieces) text += piece;
  return text;
}

TEST(IncrementalDetokenizerTest, ByteLevelEmojiSplitOverFourTokens) {
  auto tokenizer = LoadTokenizer(Gpt2StyleJson());
  // Byte-level ids equal byte values in this vocab.
  const std::vector<int32_t> ids = {'a', 0xF0, 0x9F, 0x98, 0x80, 'b'};
  EXPECT_THAT(Stream(*tokenizer, ids, false), ElementsAre("a", "", "", "", kEmoji, "b", ""));
}

TEST(IncrementalDetokenizerTest, ByteFallbackEmojiSplitOverFourTokens) {
  auto tokenizer = LoadTokenizer(SentencePieceStyleJson());
  const int32_t hello = *tokenizer->TokenToId("\xE2\x96\x81hello");
  const int32_t wor = *tokenizer->TokenToId("\xE2\x96\x81wor");
  const auto byte_id = [](int byte) { return 3 + byte; };
  const std::vector<int32_t> ids = {hello, byte_id(0xF0), byte_id(0x9F), byte_id(0x98),
                                    byte_id(0x80), wor};
  // The first token loses its leading space as in Decode; later ones keep it.
  EXPECT_THAT(Stream(*tokenizer, ids, false), ElementsAre("hello", "", "", "", kEmoji, " wor", ""));
  EXPECT_EQ(tokenizer->Decode(ids, false), "hello" + kEmoji + " wor");
}

TEST(IncrementalDetokenizerTest, FlushReleasesAnUnfinishedCharacterAsReplacement) {
  auto byte_level = LoadTokenizer(Gpt2StyleJson());
  EXPECT_THAT(Stream(*byte_level, {'a', 0xF0, 0x9F}, false), ElementsAre("a", "", "", kFffd));
  auto sentence_piece = LoadTokenizer(SentencePieceStyleJson());
  // tokenizers renders an unfinished byte-fallback run as one U+FFFD per byte.
  EXPECT_THAT(Stream(*sentence_piece, {3 + 0xF0, 3 + 0x9F}, false),
              ElementsAre("", "", kFffd + kFffd));
  EXPECT_EQ(sentence_piece->Decode(std::vector<int32_t>{3 + 0xF0, 3 + 0x9F}, false),
            kFffd + kFffd);
}

TEST(IncrementalDetokenizerTest, SkippedSpecialTokensKeepTheSpacing) {
  auto tokenizer = LoadTokenizer(SentencePieceStyleJson());
  const int32_t hello = *tokenizer->TokenToId("\xE2\x96\x81hello");
  const int32_t wor = *tokenizer->TokenToId("\xE2\x96\x81wor");
  EXPECT_THAT(Stream(*tokenizer, {1, hello, 2, wor}, true), ElementsAre("", "hello", "", " wor", ""));
  EXPECT_THAT(Stream(*tokenizer, {1, hello, 2, wor}, false),
              ElementsAre("<s>", " hello", "</s>", " wor", ""));
  EXPECT_EQ(tokenizer->Decode(std::vector<int32_t>{1, hello, 2, wor}, false), "<s> hello</s> wor");
}

TEST(IncrementalDetokenizerTest, ContextGivesTheFirstTokenItsSpace) {
  auto tokenizer = LoadTokenizer(SentencePieceStyleJson());
  const std::vector<int32_t> prompt = tokenizer->Encode("hello", true);
  const int32_t wor = *tokenizer->TokenToId("\xE2\x96\x81wor");
  const int32_t l = *tokenizer->TokenToId("l");
  EXPECT_THAT(Stream(*tokenizer, {wor, l}, true, prompt), ElementsAre(" wor", "l", ""));
  EXPECT_THAT(Stream(*tokenizer, {wor, l}, true), ElementsAre("wor", "l", ""));
}

TEST(IncrementalDetokenizerTest, ByteLevelConcatenationEqualsDecodeOnRandomIds) {
  auto tokenizer = LoadTokenizer(Gpt2StyleJson());
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int32_t> ids;
    const int length = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < length; ++i) {
      // Mostly high bytes (to split characters), some ASCII, merged tokens, the special token and
      // ids outside the vocab.
      const uint32_t kind = rng() % 10;
      ids.push_back(kind < 5   ? static_cast<int32_t>(0x80 + rng() % 0x80)
                    : kind < 7 ? static_cast<int32_t>(rng() % 0x80)
                    : kind < 8 ? static_cast<int32_t>(256 + rng() % 7)
                    : kind < 9 ? 300
                               : static_cast<int32_t>(263 + rng() % 37));
    }
    for (bool skip : {false, true}) {
      const std::vector<std::string> pieces = Stream(*tokenizer, ids, skip);
      ASSERT_EQ(Join(pieces), tokenizer->Decode(ids, skip)) << "trial " << trial;
      // No piece but the last may end inside a character.
      for (size_t i = 0; i + 1 < pieces.size(); ++i) {
        ASSERT_FALSE(utf8::EndsWithTruncatedSequence(pieces[i]));
        ASSERT_TRUE(utf8::IsValid(pieces[i]));
      }
    }
  }
}

TEST(IncrementalDetokenizerTest, SentencePieceConcatenationEqualsDecodeOnValidText) {
  auto tokenizer = LoadTokenizer(SentencePieceStyleJson());
  std::mt19937 rng(11);
  const std::vector<std::string> alphabet = {"hello", " ", "world", "\xC3\xA9", kEmoji, "\xE4\xBD\xA0",
                                             "  ", "d", "x", "<s>", "</s>"};
  for (int trial = 0; trial < 300; ++trial) {
    std::string text;
    const int length = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < length; ++i) text += alphabet[rng() % alphabet.size()];
    const std::vector<int32_t> ids = tokenizer->Encode(text, true);
    for (bool skip : {false, true}) {
      const std::vector<std::string> pieces = Stream(*tokenizer, ids, skip);
      ASSERT_EQ(Join(pieces), tokenizer->Decode(ids, skip)) << text;
      for (const std::string& piece : pieces) ASSERT_EQ(piece.find(kFffd), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace baton::runtime
