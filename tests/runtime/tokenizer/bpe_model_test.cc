#include "runtime/tokenizer/bpe_model.h"

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace baton::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<BpeModel> Load(const nlohmann::json& model) {
  absl::StatusOr<std::unique_ptr<BpeModel>> bpe =
      BpeModel::FromJson(model, JsonPath("test/tokenizer.json").Child("model"));
  EXPECT_TRUE(bpe.ok()) << bpe.status();
  return bpe.ok() ? *std::move(bpe) : nullptr;
}

std::vector<int32_t> Tokenize(const BpeModel& bpe, std::string_view word) {
  std::vector<int32_t> ids;
  bpe.Tokenize(word, &ids);
  return ids;
}

const nlohmann::json kAbcVocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}};

TEST(BpeModelTest, MergesByRankNotByPosition) {
  // "b c" outranks "a b": abc -> a bc, and without "a bc" that is final.
  auto bpe = Load({{"vocab", kAbcVocab}, {"merges", nlohmann::json::array({"b c", "a b"})}});
  EXPECT_THAT(Tokenize(*bpe, "abc"), ElementsAre(0, 4));
  // "a b" first: abc -> ab c -> abc.
  bpe = Load({{"vocab", kAbcVocab}, {"merges", nlohmann::json::array({"a b", "b c", "ab c"})}});
  EXPECT_THAT(Tokenize(*bpe, "abc"), ElementsAre(5));
  bpe = Load({{"vocab", kAbcVocab}, {"merges", nlohmann::json::array({"b c", "a b", "a bc"})}});
  EXPECT_THAT(Tokenize(*bpe, "abc"), ElementsAre(5));
}

TEST(BpeModelTest, LeftmostPairWinsTies) {
  auto bpe = Load({{"vocab", {{"a", 0}, {"aa", 1}}}, {"merges", nlohmann::json::array({"a a"})}});
  EXPECT_THAT(Tokenize(*bpe, "aaa"), ElementsAre(1, 0));
  EXPECT_THAT(Tokenize(*bpe, "aaaaa"), ElementsAre(1, 1, 0));
}

TEST(BpeModelTest, MergesAsStringsAndAsPairsAgree) {
  auto strings = Load({{"vocab", kAbcVocab}, {"merges", nlohmann::json::array({"b c", "a bc"})}});
  auto pairs = Load({{"vocab", kAbcVocab}, {"merges", nlohmann::json::array({{"b", "c"}, {"a", "bc"}})}});
  for (std::string_view word : {"abc", "cab", "abcabc", "bca"}) {
    EXPECT_EQ(Tokenize(*strings, word), Tokenize(*pairs, word)) << word;
  }
  EXPECT_THAT(Tokenize(*pairs, "abcabc"), ElementsAre(5, 5));
}

TEST(BpeModelTest, ByteFallbackSpellsUnknownCharactersAsBytes) {
  nlohmann::json vocab = {{"<unk>", 0}, {"a", 1}, {"<0xC3>", 2}, {"<0xA9>", 3}};
  auto bpe = Load({{"vocab", vocab}, {"merges", nlohmann::json::array()}, {"unk_token", "<unk>"},
                   {"byte_fallback", true}});
  EXPECT_THAT(Tokenize(*bpe, "a\xC3\xA9" "a"), ElementsAre(1, 2, 3, 1));  // aéa
  // U+00E8 is C3 A8 and <0xA8> is missing: the whole character becomes <unk>.
  EXPECT_THAT(Tokenize(*bpe, "a\xC3\xA8"), ElementsAre(1, 0));
}

TEST(BpeModelTest, UnknownCharactersFuseOnlyWithFuseUnk) {
  nlohmann::json vocab = {{"<unk>", 0}, {"a", 1}};
  auto fused = Load({{"vocab", vocab}, {"merges", nlohmann::json::array()},
                     {"unk_token", "<unk>"}, {"fuse_unk", true}});
  EXPECT_THAT(Tokenize(*fused, "xyaz"), ElementsAre(0, 1, 0));
  auto unfused = Load({{"vocab", vocab}, {"merges", nlohmann::json::array()},
                       {"unk_token", "<unk>"}});
  EXPECT_THAT(Tokenize(*unfused, "xyaz"), ElementsAre(0, 0, 1, 0));
  auto no_unk = Load({{"vocab", vocab}, {"merges", nlohmann::json::array()}});
  EXPECT_THAT(Tokenize(*no_unk, "xyaz"), ElementsAre(1));
}

TEST(BpeModelTest, IgnoreMergesTakesWholeWordsFromTheVocab) {
  // "abc" is in the vocab but no merge sequence reaches it.
  nlohmann::json model = {{"vocab", kAbcVocab}, {"merges", nlohmann::json::array({"a b"})}};
  EXPECT_THAT(Tokenize(*Load(model), "abc"), ElementsAre(3, 2));
  model["ignore_merges"] = true;
  EXPECT_THAT(Tokenize(*Load(model), "abc"), ElementsAre(5));
  EXPECT_THAT(Tokenize(*Load(model), "abcc"), ElementsAre(3, 2, 2));
}

TEST(BpeModelTest, ContinuingSubwordPrefixAndEndOfWordSuffix) {
  nlohmann::json vocab = {{"a", 0}, {"##b", 1}, {"##c</w>", 2}, {"a##b", 3}, {"b", 4}};
  auto bpe = Load({{"vocab", vocab}, {"merges", nlohmann::json::array({"a ##b"})},
                   {"continuing_subword_prefix", "##"}, {"end_of_word_suffix", "</w>"}});
  EXPECT_THAT(Tokenize(*bpe, "abc"), ElementsAre(3, 2));
}

TEST(BpeModelTest, RejectsMergesOutsideTheVocab) {
  absl::StatusOr<std::unique_ptr<BpeModel>> bpe =
      BpeModel::FromJson({{"vocab", kAbcVocab}, {"merges", nlohmann::json::array({"a b", "c a"})}},
                         JsonPath("m/tokenizer.json").Child("model"));
  ASSERT_FALSE(bpe.ok());
  EXPECT_EQ(bpe.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bpe.status().message(), HasSubstr("m/tokenizer.json"));
  EXPECT_THAT(bpe.status().message(), HasSubstr("model.merges[1]"));

  bpe = BpeModel::FromJson({{"vocab", kAbcVocab}, {"merges", nlohmann::json::array({"a b c"})}},
                           JsonPath("t.json").Child("model"));
  EXPECT_EQ(bpe.status().code(), absl::StatusCode::kInvalidArgument);
  bpe = BpeModel::FromJson({{"vocab", {{"a", "zero"}}}}, JsonPath("t.json").Child("model"));
  EXPECT_EQ(bpe.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bpe.status().message(), HasSubstr("model.vocab.a"));
}

// The textbook algorithm: merge the lowest-ranked adjacent pair (leftmost on ties) until none is
// left, rescanning the whole word each time.
std::vector<int32_t> ReferenceBpe(const std::vector<int32_t>& initial,
                                  const std::map<std::pair<int32_t, int32_t>,
                                                 std::pair<int, int32_t>>& merges) {
  std::vector<int32_t> symbols = initial;
  while (true) {
    int best_rank = -1;
    size_t best_pos = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it = merges.find({symbols[i], symbols[i + 1]});
      if (it != merges.end() && (best_rank < 0 || it->second.first < best_rank)) {
        best_rank = it->second.first;
        best_pos = i;
      }
    }
    if (best_rank < 0) return symbols;
    symbols[best_pos] = merges.at({symbols[best_pos], symbols[best_pos + 1]}).second;
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best_pos) + 1);
  }
}

TEST(BpeModelTest, MatchesTheTextbookAlgorithmOnRandomMergeTables) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 20; ++trial) {
    // Alphabet a..e, then random merges of existing tokens whose result is new.
    std::vector<std::string> tokens = {"a", "b", "c", "d", "e"};
    nlohmann::json vocab = nlohmann::json::object();
    for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = static_cast<int>(i);
    nlohmann::json merges = nlohmann::json::array();
    std::map<std::pair<int32_t, int32_t>, std::pair<int, int32_t>> reference_merges;
    while (merges.size() < 60) {
      const std::string& left = tokens[rng() % tokens.size()];
      const std::string& right = tokens[rng() % tokens.size()];
      const std::string merged = left + right;
      if (merged.size() > 8 || vocab.contains(merged)) continue;
      const int32_t new_id = static_cast<int32_t>(tokens.size());
      reference_merges[{vocab[left].get<int32_t>(), vocab[right].get<int32_t>()}] = {
          static_cast<int>(merges.size()), new_id};
      merges.push_back({left, right});
      vocab[merged] = new_id;
      tokens.push_back(merged);
    }
    auto bpe = Load({{"vocab", vocab}, {"merges", merges}});
    for (int word_idx = 0; word_idx < 50; ++word_idx) {
      std::string word;
      std::vector<int32_t> initial;
      const size_t length = 1 + rng() % (word_idx < 45 ? 30 : 3000);
      for (size_t i = 0; i < length; ++i) {
        const int letter = static_cast<int>(rng() % 5);
        word.push_back(static_cast<char>('a' + letter));
        initial.push_back(letter);
      }
      ASSERT_EQ(Tokenize(*bpe, word), ReferenceBpe(initial, reference_merges))
          << "trial " << trial << " word " << word;
      // A second call is served by the cache and must agree.
      ASSERT_EQ(Tokenize(*bpe, word), ReferenceBpe(initial, reference_merges));
    }
  }
}

}  // namespace
}  // namespace baton::runtime
