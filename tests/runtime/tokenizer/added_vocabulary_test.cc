#include "runtime/tokenizer/added_vocabulary.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace baton::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

using Pieces = std::vector<std::pair<std::string, int32_t>>;

std::optional<int32_t> NoModel(std::string_view) { return std::nullopt; }

// The lists of tokens below are json::array(...): a braced list of one json value is a copy of that
// value under clang, not a one-element array (nlohmann's documented pitfall).
nlohmann::json Token(int id, std::string content, bool special, nlohmann::json options = {}) {
  nlohmann::json token = {{"id", id}, {"content", std::move(content)}, {"special", special}};
  if (options.is_object()) token.update(options);
  return token;
}

// Splits like Tokenizer::Encode: raw tokens first, then normalized tokens in normalized stretches.
Pieces Split(const nlohmann::json& added_tokens, const nlohmann::json& normalizer_json,
             std::string_view text) {
  const JsonPath at("t.json");
  absl::StatusOr<Normalizer> normalizer = Normalizer::FromJson(normalizer_json, at);
  EXPECT_TRUE(normalizer.ok()) << normalizer.status();
  absl::StatusOr<AddedVocabulary> vocab =
      AddedVocabulary::FromJson(added_tokens, *normalizer, NoModel, at);
  EXPECT_TRUE(vocab.ok()) << vocab.status();
  Pieces pieces;
  for (const AddedSplit& raw : vocab->SplitRaw(text)) {
    const std::string raw_text(text.substr(raw.begin, raw.end - raw.begin));
    if (raw.added_id >= 0) {
      pieces.emplace_back(raw_text, raw.added_id);
      continue;
    }
    const std::string normalized = normalizer->Apply(raw_text);
    for (const AddedSplit& split : vocab->SplitNormalized(normalized)) {
      pieces.emplace_back(normalized.substr(split.begin, split.end - split.begin), split.added_id);
    }
  }
  return pieces;
}

const nlohmann::json kLowercase = {{"type", "Lowercase"}};

TEST(AddedVocabularyTest, SplitsOnSpecialAndNormalizedTokens) {
  const nlohmann::json tokens = nlohmann::json::array(
      {Token(0, "my", false), Token(1, "name", false), Token(2, "[CLS]", true),
       Token(3, "[SEP]", true)});
  EXPECT_THAT(Split(tokens, nullptr, "[CLS] My name is Anthony [SEP]"),
              ElementsAre(Pair("[CLS]", 2), Pair(" My ", -1), Pair("name", 1),
                          Pair(" is Anthony ", -1), Pair("[SEP]", 3)));
}

TEST(AddedVocabularyTest, LstripRstripSingleWordAndNormalized) {
  const nlohmann::json tokens = nlohmann::json::array({
      Token(0, "my", false, {{"lstrip", true}, {"rstrip", true}}), Token(1, "name", false),
      Token(2, "ony", false, {{"single_word", true}}), Token(3, "[CLS]", true),
      Token(4, "[SEP]", true)});
  // "My" matches "my" after lowercasing and swallows the spaces around it; "ony" inside
  // "anthony" is not a single word.
  EXPECT_THAT(Split(tokens, kLowercase, "[CLS] My name is Anthony [SEP]"),
              ElementsAre(Pair("[CLS]", 3), Pair(" my ", 0), Pair("name", 1),
                          Pair(" is anthony ", -1), Pair("[SEP]", 4)));
}

TEST(AddedVocabularyTest, SingleWordNeedsNonWordNeighbours) {
  const nlohmann::json tokens =
      nlohmann::json::array({Token(0, "<mask>", false, {{"single_word", true}})});
  EXPECT_THAT(Split(tokens, kLowercase, "<mask> My name <mask> A<mask> <mask>ony <mask>"),
              ElementsAre(Pair("<mask>", 0), Pair(" my name ", -1), Pair("<mask>", 0),
                          Pair(" a<mask> <mask>ony ", -1), Pair("<mask>", 0)));
  // Punctuation is not a word character; a combining mark is.
  EXPECT_THAT(Split(tokens, kLowercase, "<mask>, <mask>- \xE2\x97\x8C\xCC\xB0<mask>"),
              ElementsAre(Pair("<mask>", 0), Pair(", ", -1), Pair("<mask>", 0),
                          Pair("- \xE2\x97\x8C\xCC\xB0<mask>", -1)));
}

TEST(AddedVocabularyTest, StripsUnicodeWhitespaceWithoutOverlappingThePreviousMatch) {
  const nlohmann::json tokens = nlohmann::json::array({
      Token(0, "<mask>", false, {{"lstrip", true}, {"rstrip", true}, {"single_word", true}})});
  EXPECT_THAT(Split(tokens, kLowercase, "Hi <mask> there\t<mask>\t<mask>\xE2\x80\x80"),
              ElementsAre(Pair("hi", -1), Pair(" <mask> ", 0), Pair("there", -1),
                          Pair("\t<mask>\t", 0), Pair("<mask>\xE2\x80\x80", 0)));
}

TEST(AddedVocabularyTest, LongestMatchWinsAtTheSamePosition) {
  const nlohmann::json tokens = nlohmann::json::array(
      {Token(10, "<|a", true), Token(11, "<|ab|>", true), Token(12, "b|>", true)});
  EXPECT_THAT(Split(tokens, nullptr, "x<|ab|><|ab"),
              ElementsAre(Pair("x", -1), Pair("<|ab|>", 11), Pair("<|a", 10), Pair("b", -1)));
}

TEST(AddedVocabularyTest, NormalizedTokensAreMatchedInTheirNormalizedForm) {
  // With a Prepend normalizer, the content "foo" is searched for as "_foo".
  const nlohmann::json prepend = {{"type", "Prepend"}, {"prepend", "_"}};
  const nlohmann::json tokens = nlohmann::json::array({Token(5, "foo", false)});
  EXPECT_THAT(Split(tokens, prepend, "foo"), ElementsAre(Pair("_foo", 5)));
  EXPECT_THAT(Split(tokens, prepend, "xfoo"), ElementsAre(Pair("_xfoo", -1)));
  // Decoding starts from the normalized form.
  absl::StatusOr<Normalizer> normalizer = Normalizer::FromJson(prepend, JsonPath("t"));
  absl::StatusOr<AddedVocabulary> vocab =
      AddedVocabulary::FromJson(tokens, *normalizer, NoModel, JsonPath("t"));
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_EQ(vocab->FindById(5)->decode_text, "_foo");
}

TEST(AddedVocabularyTest, ATokenTheModelHasKeepsTheModelsId) {
  const auto model_id = [](std::string_view content) -> std::optional<int32_t> {
    if (content == "foo") return 7;
    return std::nullopt;
  };
  absl::StatusOr<AddedVocabulary> vocab = AddedVocabulary::FromJson(
      {Token(99, "foo", false), Token(100, "bar", true)}, Normalizer(), model_id, JsonPath("t"));
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_EQ(vocab->FindByContent("foo")->id, 7);
  EXPECT_EQ(vocab->FindByContent("bar")->id, 100);
  EXPECT_EQ(vocab->FindById(99), nullptr);
}

TEST(AddedVocabularyTest, RejectsMalformedEntries) {
  const JsonPath at = JsonPath("m/tokenizer.json").Child("added_tokens");
  absl::StatusOr<AddedVocabulary> vocab =
      AddedVocabulary::FromJson({{{"content", "<s>"}}}, Normalizer(), NoModel, at);
  ASSERT_FALSE(vocab.ok());
  EXPECT_EQ(vocab.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(vocab.status().message(), ::testing::HasSubstr("added_tokens[0].id"));
}

}  // namespace
}  // namespace baton::runtime
