#include "runtime/tokenizer/decoder.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/tokenizer/utf8.h"

namespace baton::runtime {
namespace {

const std::string kSpace = "\xE2\x96\x81";
const std::string kFffd(utf8::kReplacementChar);

Decoder Load(const nlohmann::json& json) {
  absl::StatusOr<Decoder> decoder = Decoder::FromJson(json, JsonPath("t.json").Child("decoder"));
  EXPECT_TRUE(decoder.ok()) << decoder.status();
  return decoder.ok() ? *std::move(decoder) : Decoder();
}

const nlohmann::json kSentencePieceChain = {
    {"type", "Sequence"},
    {"decoders",
     {{{"type", "Replace"}, {"pattern", {{"String", kSpace}}}, {"content", " "}},
      {{"type", "ByteFallback"}},
      {{"type", "Fuse"}},
      {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};

// Expected strings are what tokenizers' decoders return for the same tokens.
TEST(DecoderTest, SentencePieceChain) {
  const Decoder decoder = Load(kSentencePieceChain);
  EXPECT_EQ(decoder.Decode({kSpace + "a", "<0xE2>", "<0x82>", "<0xAC>", "b"}).text,
            "a\xE2\x82\xAC" "b");
  // An invalid run becomes one U+FFFD per byte, not per maximal subpart.
  EXPECT_EQ(decoder.Decode({kSpace + "a", "<0xE2>", "<0x82>", "<0xFF>", "b"}).text,
            "a" + kFffd + kFffd + kFffd + "b");
  // Only one leading space is stripped.
  EXPECT_EQ(decoder.Decode({kSpace + kSpace + "a"}).text, " a");
}

TEST(DecoderTest, ReportsAByteRunThatStopsMidCharacter) {
  const Decoder decoder = Load(kSentencePieceChain);
  DecodedText decoded = decoder.Decode({kSpace + "a", "<0xE2>", "<0x82>"});
  EXPECT_EQ(decoded.text, "a" + kFffd + kFffd);
  EXPECT_TRUE(decoded.ends_mid_char);
  // Invalid before its end: no later byte can repair it.
  decoded = decoder.Decode({"<0xFF>", "<0xE2>"});
  EXPECT_FALSE(decoded.ends_mid_char);
  decoded = decoder.Decode({"<0xE2>", "<0x82>", "b"});
  EXPECT_FALSE(decoded.ends_mid_char);
}

TEST(DecoderTest, ByteLevel) {
  const Decoder decoder = Load({{"type", "ByteLevel"}});
  // U+0142 spells byte 0xA0; a token with a character outside the table keeps its own bytes.
  EXPECT_EQ(decoder.Decode({"a", "\xC3\x83", "\xC5\x82", "\xEF\xBD\x86"}).text,
            "a\xC3\xA0\xEF\xBD\x86");
  DecodedText decoded = decoder.Decode({"\xC3\xB0", "\xC5\x81"});  // bytes F0 9F
  EXPECT_EQ(decoded.text, kFffd);
  EXPECT_TRUE(decoded.ends_mid_char);
}

TEST(DecoderTest, StripMetaspaceAndNoDecoder) {
  EXPECT_EQ(Load({{"type", "Strip"}, {"content", "x"}, {"start", 2}, {"stop", 2}})
                .Decode({"xxxaxxx"})
                .text,
            "xax");
  // Metaspace drops every replacement character of the first token unless prepend_scheme is
  // "never".
  EXPECT_EQ(Load({{"type", "Metaspace"}, {"replacement", kSpace}, {"prepend_scheme", "always"}})
                .Decode({kSpace + kSpace + "a" + kSpace + "b", kSpace + "c"})
                .text,
            "ab c");
  EXPECT_EQ(Load({{"type", "Metaspace"}, {"replacement", kSpace}, {"prepend_scheme", "never"}})
                .Decode({kSpace + "a", kSpace + "b"})
                .text,
            " a b");
  EXPECT_EQ(Load(nullptr).Decode({"a", "b"}).text, "a b");
}

TEST(DecoderTest, RejectsUnsupportedDecoders) {
  absl::StatusOr<Decoder> decoder =
      Decoder::FromJson({{"type", "WordPiece"}}, JsonPath("m/tokenizer.json").Child("decoder"));
  ASSERT_FALSE(decoder.ok());
  EXPECT_EQ(decoder.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(decoder.status().message(), ::testing::HasSubstr("m/tokenizer.json"));
  EXPECT_THAT(decoder.status().message(), ::testing::HasSubstr("decoder.type"));
}

}  // namespace
}  // namespace baton::runtime
