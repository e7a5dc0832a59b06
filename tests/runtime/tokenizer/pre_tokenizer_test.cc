#include "runtime/tokenizer/pre_tokenizer.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/runtime/tokenizer/tokenizer_test_util.h"

namespace baton::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using testing::ByteLevelSpelling;

// The Llama-3 and Qwen2 pre-tokenizer patterns as their tokenizer.json files carry them.
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::vector<std::string> Apply(const nlohmann::json& json, std::string_view text,
                               bool at_origin = true) {
  absl::StatusOr<PreTokenizer> pre_tokenizer =
      PreTokenizer::FromJson(json, JsonPath("t.json").Child("pre_tokenizer"));
  EXPECT_TRUE(pre_tokenizer.ok()) << pre_tokenizer.status();
  std::vector<std::string> words;
  if (pre_tokenizer.ok()) pre_tokenizer->Apply(text, at_origin, &words);
  return words;
}

nlohmann::json SplitJson(std::string_view literal, std::string_view behavior, bool invert) {
  return {{"type", "Split"}, {"pattern", {{"String", literal}}}, {"behavior", behavior},
          {"invert", invert}};
}

// Expected pieces come from tokenizers' pre_tokenize_str on the same input.
TEST(PreTokenizerTest, SplitBehaviors) {
  EXPECT_THAT(Apply(SplitJson("-", "Removed", false), "a-b--c"), ElementsAre("a", "b", "c"));
  EXPECT_THAT(Apply(SplitJson("-", "Isolated", false), "a-b--c"),
              ElementsAre("a", "-", "b", "-", "-", "c"));
  EXPECT_THAT(Apply(SplitJson("-", "MergedWithPrevious", false), "a-b--c"),
              ElementsAre("a-", "b-", "-", "c"));
  EXPECT_THAT(Apply(SplitJson("-", "MergedWithNext", false), "a-b--c"),
              ElementsAre("a", "-b", "-", "-c"));
  EXPECT_THAT(Apply(SplitJson("-", "Contiguous", false), "a-b--c"),
              ElementsAre("a", "-", "b", "--", "c"));
  EXPECT_THAT(Apply(SplitJson("-", "Removed", true), "a-b--c"), ElementsAre("-", "-", "-"));
  EXPECT_THAT(Apply(SplitJson("-", "MergedWithPrevious", true), "a-b--c"),
              ElementsAre("a", "-b", "-", "-c"));
}

TEST(PreTokenizerTest, ByteLevelUsesTheGpt2PatternAndSpellsBytes) {
  const nlohmann::json json = {{"type", "ByteLevel"}, {"add_prefix_space", false},
                               {"use_regex", true}};
  std::vector<std::string> expected;
  for (std::string_view piece : {"Hello", " world", "'s", " ", " 123", "\n\n ", " x"}) {
    expected.push_back(ByteLevelSpelling(piece));
  }
  EXPECT_THAT(Apply(json, "Hello world's  123\n\n  x"), ElementsAreArray(expected));
  // add_prefix_space adds a space unless the text starts with one.
  const nlohmann::json prefixed = {{"type", "ByteLevel"}, {"add_prefix_space", true}};
  EXPECT_THAT(Apply(prefixed, "Hi"), ElementsAre(ByteLevelSpelling(" Hi")));
  EXPECT_THAT(Apply(prefixed, " Hi"), ElementsAre(ByteLevelSpelling(" Hi")));
}

TEST(PreTokenizerTest, Llama3AndQwen2Patterns) {
  const auto split = [](std::string_view pattern) {
    return nlohmann::json{{"type", "Split"}, {"pattern", {{"Regex", pattern}}},
                          {"behavior", "Isolated"}, {"invert", false}};
  };
  EXPECT_THAT(Apply(split(kLlama3Pattern), "I'M  12345 abc!!\n\n  x"),
              ElementsAre("I", "'M", " ", " ", "123", "45", " abc", "!!\n\n", " ", " x"));
  EXPECT_THAT(Apply(split(kQwen2Pattern), "ab 123"), ElementsAre("ab", " ", "1", "2", "3"));
  // \p{L} is Unicode-aware: accented and CJK letters stay in one piece.
  EXPECT_THAT(Apply(split(kLlama3Pattern), "caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD"),
              ElementsAre("caf\xC3\xA9", " \xE4\xBD\xA0\xE5\xA5\xBD"));
  // Split + ByteLevel(use_regex=false) as in Llama-3's tokenizer.json.
  const nlohmann::json sequence = {
      {"type", "Sequence"},
      {"pretokenizers",
       {split(kLlama3Pattern),
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  EXPECT_THAT(Apply(sequence, "a b"), ElementsAre("a", ByteLevelSpelling(" b")));
}

TEST(PreTokenizerTest, MetaspaceSchemes) {
  const std::string kSpace = "\xE2\x96\x81";
  const nlohmann::json always = {{"type", "Metaspace"}, {"replacement", kSpace},
                                 {"prepend_scheme", "always"}, {"split", true}};
  EXPECT_THAT(Apply(always, "Hello  world"),
              ElementsAre(kSpace + "Hello", kSpace, kSpace + "world"));
  nlohmann::json first = always;
  first["prepend_scheme"] = "first";
  first["split"] = false;
  EXPECT_THAT(Apply(first, "Hello world", /*at_origin=*/true),
              ElementsAre(kSpace + "Hello" + kSpace + "world"));
  EXPECT_THAT(Apply(first, "Hello", /*at_origin=*/false), ElementsAre("Hello"));
  const nlohmann::json legacy = {{"type", "Metaspace"}, {"replacement", kSpace},
                                 {"add_prefix_space", false}};
  EXPECT_THAT(Apply(legacy, "a b"), ElementsAre("a", kSpace + "b"));
}

TEST(PreTokenizerTest, Digits) {
  EXPECT_THAT(Apply({{"type", "Digits"}, {"individual_digits", false}}, "ab12c3"),
              ElementsAre("ab", "12", "c", "3"));
  EXPECT_THAT(Apply({{"type", "Digits"}, {"individual_digits", true}}, "ab12"),
              ElementsAre("ab", "1", "2"));
}

TEST(PreTokenizerTest, RejectsUnsupportedTypesAndBadRegexes) {
  absl::StatusOr<PreTokenizer> result = PreTokenizer::FromJson(
      {{"type", "BertPreTokenizer"}}, JsonPath("x/tokenizer.json").Child("pre_tokenizer"));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(result.status().message(), ::testing::HasSubstr("pre_tokenizer.type"));
  result = PreTokenizer::FromJson(
      {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}},
      JsonPath("x/tokenizer.json").Child("pre_tokenizer"));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), ::testing::HasSubstr("pre_tokenizer.pattern.Regex"));
}

}  // namespace
}  // namespace baton::runtime
