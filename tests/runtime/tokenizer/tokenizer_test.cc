#include "runtime/tokenizer/tokenizer.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/runtime/tokenizer/tokenizer_test_util.h"

namespace baton::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ByteLevelSpelling;
using testing::Gpt2StyleJson;
using testing::LoadTokenizer;
using testing::SentencePieceStyleJson;

// A fresh directory under the test's temp dir.
std::filesystem::path MakeTempDir(std::string_view name) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                    ("baton_tokenizer_test_" + std::to_string(::getpid())) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void WriteFile(const std::filesystem::path& path, std::string_view contents) {
  std::ofstream(path, std::ios::binary) << contents;
}

TEST(TokenizerTest, Gpt2StyleEncodeAndDecode) {
  auto tokenizer = LoadTokenizer(Gpt2StyleJson());
  ASSERT_NE(tokenizer, nullptr);
  const int32_t the = *tokenizer->TokenToId(ByteLevelSpelling(" the"));
  const int32_t hello = *tokenizer->TokenToId("hello");
  // "hello the<|endoftext|>!": regex pieces "hello", " the", then the special token, then "!".
  const std::vector<int32_t> ids = tokenizer->Encode("hello the<|endoftext|>!", true);
  EXPECT_THAT(ids, ElementsAre(hello, the, 300, '!'));
  EXPECT_EQ(tokenizer->Decode(ids, false), "hello the<|endoftext|>!");
  EXPECT_EQ(tokenizer->Decode(ids, true), "hello the!");
  EXPECT_TRUE(tokenizer->IsSpecial(300));
  EXPECT_FALSE(tokenizer->IsSpecial(the));
  EXPECT_EQ(tokenizer->vocab_size(), 301);
  EXPECT_EQ(tokenizer->eos_id(), 300);  // the fallback name list
  EXPECT_EQ(tokenizer->bos_id(), std::nullopt);
  // Every byte round-trips, including invalid UTF-8 halves of a character split across ids.
  EXPECT_EQ(tokenizer->Decode(tokenizer->Encode("\xF0\x9F\x98\x80 caf\xC3\xA9", false), false),
            "\xF0\x9F\x98\x80 caf\xC3\xA9");
  EXPECT_EQ(tokenizer->Decode(std::vector<int32_t>{0xF0, 0x9F}, false), "\xEF\xBF\xBD");
}

TEST(TokenizerTest, SentencePieceStyleEncodeAndDecode) {
  auto tokenizer = LoadTokenizer(SentencePieceStyleJson());
  ASSERT_NE(tokenizer, nullptr);
  const int32_t hello = *tokenizer->TokenToId("\xE2\x96\x81hello");
  const int32_t wor = *tokenizer->TokenToId("\xE2\x96\x81wor");
  const int32_t l = *tokenizer->TokenToId("l");
  const int32_t d = *tokenizer->TokenToId("d");
  EXPECT_THAT(tokenizer->Encode("hello world", true), ElementsAre(1, hello, wor, l, d));
  EXPECT_THAT(tokenizer->Encode("hello world", false), ElementsAre(hello, wor, l, d));
  EXPECT_EQ(tokenizer->Decode(tokenizer->Encode("hello world", true), true), "hello world");
  EXPECT_EQ(tokenizer->Decode(tokenizer->Encode("hello world", true), false), "<s> hello world");
  // "é" (C3 A9) is not in the vocab: byte fallback, then back.
  const std::vector<int32_t> ids = tokenizer->Encode("h\xC3\xA9", false);
  EXPECT_THAT(ids, ElementsAre(*tokenizer->TokenToId("\xE2\x96\x81"), *tokenizer->TokenToId("h"),
                               3 + 0xC3, 3 + 0xA9));
  EXPECT_EQ(tokenizer->Decode(ids, false), "h\xC3\xA9");
  // Text after a special token is normalized on its own, so it gets its own "▁" (as in
  // `tokenizers`).
  EXPECT_THAT(tokenizer->Encode("<s>hello", false), ElementsAre(1, hello));
  EXPECT_EQ(tokenizer->bos_id(), 1);
  EXPECT_EQ(tokenizer->eos_id(), 2);
}

TEST(TokenizerTest, EmptyTextGetsOnlyTheTemplate) {
  auto tokenizer = LoadTokenizer(SentencePieceStyleJson());
  EXPECT_THAT(tokenizer->Encode("", true), ElementsAre(1));
  EXPECT_TRUE(tokenizer->Encode("", false).empty());
  EXPECT_EQ(tokenizer->Decode(std::vector<int32_t>{}, false), "");
}

TEST(TokenizerTest, InvalidUtf8InputIsReadAsReplacementCharacters) {
  auto tokenizer = LoadTokenizer(Gpt2StyleJson());
  EXPECT_EQ(tokenizer->Encode("a\xFF" "b", false), tokenizer->Encode("a\xEF\xBF\xBD" "b", false));
}

TEST(TokenizerTest, TokenizerConfigNamesBosAndEosAndOverridesTheTemplate) {
  const nlohmann::json json = SentencePieceStyleJson();
  // Object form and string form; add_bos_token=false drops the template's <s>; add_eos_token adds.
  auto tokenizer = LoadTokenizer(
      json, R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>",
               "add_bos_token": false, "add_eos_token": true})");
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->bos_id(), 1);
  EXPECT_EQ(tokenizer->eos_id(), 2);
  const int32_t hello = *tokenizer->TokenToId("\xE2\x96\x81hello");
  EXPECT_THAT(tokenizer->Encode("hello", true), ElementsAre(hello, 2));

  // Without add_* the template stands; eos can name any token.
  tokenizer = LoadTokenizer(json, R"({"eos_token": "<unk>"})");
  EXPECT_THAT(tokenizer->Encode("hello", true), ElementsAre(1, hello));
  EXPECT_EQ(tokenizer->eos_id(), 0);

  absl::StatusOr<std::unique_ptr<Tokenizer>> bad = Tokenizer::FromJsonText(
      json.dump(), R"({"bos_token": "<nope>"})", "t/tokenizer.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("bos_token"));
}

TEST(TokenizerTest, FromFileReadsTheConfigBesideIt) {
  const std::filesystem::path dir = MakeTempDir("with_config");
  WriteFile(dir / "tokenizer.json", Gpt2StyleJson().dump());
  WriteFile(dir / "tokenizer_config.json", R"({"bos_token": "<|endoftext|>", "eos_token": null})");
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromFile(dir / "tokenizer.json");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->bos_id(), 300);
  EXPECT_EQ((*tokenizer)->eos_id(), 300);
}

TEST(TokenizerTest, LoadErrorsNameTheFileAndTheField) {
  const std::filesystem::path dir = MakeTempDir("errors");
  absl::StatusOr<std::unique_ptr<Tokenizer>> result = Tokenizer::FromFile(dir / "missing.json");
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(result.status().message(), HasSubstr("missing.json"));

  WriteFile(dir / "tokenizer.json", R"({"model": {"type": "BPE", "vocab": {)");
  result = Tokenizer::FromFile(dir / "tokenizer.json");
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("tokenizer.json"));
  EXPECT_THAT(result.status().message(), HasSubstr("malformed JSON"));

  for (std::string_view type : {"WordPiece", "Unigram", "WordLevel"}) {
    nlohmann::json json = Gpt2StyleJson();
    json["model"]["type"] = type;
    WriteFile(dir / "tokenizer.json", json.dump());
    result = Tokenizer::FromFile(dir / "tokenizer.json");
    EXPECT_EQ(result.status().code(), absl::StatusCode::kUnimplemented) << type;
    EXPECT_THAT(result.status().message(), HasSubstr((dir / "tokenizer.json").string()));
    EXPECT_THAT(result.status().message(), HasSubstr("'model.type'"));
    EXPECT_THAT(result.status().message(), HasSubstr(type));
  }

  nlohmann::json json = Gpt2StyleJson();
  json["normalizer"] = {{"type", "BertNormalizer"}};
  result = Tokenizer::FromJsonText(json.dump(), "", "t/tokenizer.json");
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(result.status().message(), HasSubstr("'normalizer.type'"));

  json = Gpt2StyleJson();
  json.erase("model");
  result = Tokenizer::FromJsonText(json.dump(), "", "t/tokenizer.json");
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("'model'"));

  json = SentencePieceStyleJson();
  json["post_processor"]["special_tokens"]["<s>"]["ids"] = nlohmann::json::array({99999});
  result = Tokenizer::FromJsonText(json.dump(), "", "t/tokenizer.json");
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("99999"));
}

TEST(TokenizerTest, ConcurrentEncodesAgreeWithASerialOne) {
  auto tokenizer = LoadTokenizer(Gpt2StyleJson());
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) {
    texts.push_back("hello " + std::to_string(i * 7919) + " the\t\xC3\xA9t\xC3\xA9  " +
                    std::string(static_cast<size_t>(i % 13), 'l') + "<|endoftext|>");
  }
  std::vector<std::vector<int32_t>> expected;
  for (const std::string& text : texts) expected.push_back(tokenizer->Encode(text, true));
  // A fresh tokenizer, so the threads race on an empty word cache.
  auto shared = LoadTokenizer(Gpt2StyleJson());
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t index = (i * (t + 1) + round) % texts.size();
          if (shared->Encode(texts[index], true) != expected[index]) ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_THAT(mismatches, ElementsAre(0, 0, 0, 0));
}

}  // namespace
}  // namespace baton::runtime
