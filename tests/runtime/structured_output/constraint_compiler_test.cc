// ConstraintCompiler and ConstraintMatcher over a real byte-level BPE vocabulary (models/kjv-4m's):
// random walks under each constraint's bitmask always end in text the constraint accepts, the
// special tokens never appear, and what does not compile says why.
#include "runtime/structured_output/constraint_compiler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <regex>
#include <sstream>

#include "nlohmann/json.hpp"
#include "runtime/tokenizer/tokenizer.h"

namespace baton::runtime {
namespace {

using ::testing::HasSubstr;

constexpr int kVocabSize = 4096;
const std::vector<int32_t> kStopIds = {1, 4};  // <|end_of_text|>, <|eot_id|>

std::filesystem::path TokenizerPath() {
  return std::filesystem::path(BATON_TEST_SOURCE_DIR) / "models/kjv-4m/tokenizer.json";
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class ConstraintCompilerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_ = Tokenizer::FromFile(TokenizerPath()).value().release();
    compiler_ = ConstraintCompiler::Create(*tokenizer_, ReadFile(TokenizerPath()), kVocabSize, kStopIds)
                    .value()
                    .release();
  }
  static void TearDownTestSuite() {
    delete compiler_;
    delete tokenizer_;
  }

  static bool Allowed(const std::vector<int32_t>& bitmask, int32_t id) {
    return (bitmask[id / 32] >> (id % 32)) & 1;
  }

  // Draws tokens uniformly among those the bitmask allows (a stop token, once allowed, with
  // probability 1/2) until the matcher terminates or `max_tokens` pass. The text before the stop
  // token, or nullopt when it did not terminate.
  static std::optional<std::string> RandomWalk(const OutputConstraint& constraint, uint32_t seed,
                                               int max_tokens = 400) {
    const auto compiled = compiler_->Compile(constraint);
    EXPECT_TRUE(compiled.ok()) << compiled.status();
    ConstraintMatcher matcher = compiler_->NewMatcher(*compiled);
    std::mt19937 rng(seed);
    std::vector<int32_t> bitmask(TokenBitmaskWords(kVocabSize));
    std::vector<int32_t> generated;
    for (int step = 0; step < max_tokens && !matcher.IsTerminated(); ++step) {
      EXPECT_TRUE(matcher.FillNextTokenBitmask(bitmask));
      std::vector<int32_t> allowed;
      bool stop_allowed = false;
      for (int32_t id = 0; id < kVocabSize; ++id) {
        if (!Allowed(bitmask, id)) continue;
        if (id == kStopIds[0] || id == kStopIds[1]) {
          stop_allowed = true;
        } else {
          EXPECT_FALSE(tokenizer_->IsSpecial(id)) << "special token " << id << " allowed";
          allowed.push_back(id);
        }
      }
      int32_t next;
      if (stop_allowed && (allowed.empty() || rng() % 2 == 0)) {
        next = kStopIds[1];
      } else {
        EXPECT_FALSE(allowed.empty()) << "nothing allowed after " << generated.size() << " tokens";
        if (allowed.empty()) return std::nullopt;
        next = allowed[rng() % allowed.size()];
        generated.push_back(next);
      }
      EXPECT_TRUE(matcher.AcceptToken(next).ok());
    }
    if (!matcher.IsTerminated()) return std::nullopt;
    return tokenizer_->Decode(generated, /*skip_special_tokens=*/false);
  }

  static Tokenizer* tokenizer_;
  static ConstraintCompiler* compiler_;
};

Tokenizer* ConstraintCompilerTest::tokenizer_ = nullptr;
ConstraintCompiler* ConstraintCompilerTest::compiler_ = nullptr;

TEST_F(ConstraintCompilerTest, JsonSchemaWalksParseAndValidate) {
  OutputConstraint constraint{.kind = OutputConstraint::Kind::kJsonSchema,
                              .text = R"({"type": "object", "properties": {
                                  "color": {"enum": ["red", "green"]},
                                  "ok": {"type": "boolean"},
                                  "tag": {"type": "string", "maxLength": 6}},
                                "required": ["color", "ok", "tag"]})"};
  int num_terminated = 0;
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const std::optional<std::string> text = RandomWalk(constraint, seed);
    if (!text) continue;
    ++num_terminated;
    const nlohmann::json value = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(value.is_discarded()) << *text;
    ASSERT_TRUE(value.is_object()) << *text;
    EXPECT_EQ(value.size(), 3u) << *text;  // strict: no property the schema does not name
    EXPECT_TRUE(value.at("color") == "red" || value.at("color") == "green") << *text;
    EXPECT_TRUE(value.at("ok").is_boolean()) << *text;
    const std::string tag = value.at("tag").get<std::string>();  // maxLength counts code points
    EXPECT_LE(std::count_if(tag.begin(), tag.end(), [](char c) { return (c & 0xC0) != 0x80; }), 6) << *text;
  }
  EXPECT_GE(num_terminated, 15);
}

TEST_F(ConstraintCompilerTest, CompactJsonHasNoWhitespaceButAfterSeparators) {
  OutputConstraint constraint{.kind = OutputConstraint::Kind::kJsonSchema,
                              .text = R"({"type": "object", "properties": {
                                  "n": {"type": "integer"}, "list": {"type": "array", "items": {"enum": [1, 2]}}},
                                "required": ["n", "list"]})",
                              .any_whitespace = false};
  int num_terminated = 0;
  for (uint32_t seed = 0; seed < 10; ++seed) {
    const std::optional<std::string> text = RandomWalk(constraint, seed);
    if (!text) continue;
    ++num_terminated;
    // As Python's json.dumps writes it: ", " and ": ", nothing else.
    EXPECT_TRUE(std::regex_match(*text, std::regex(R"(\{"n": -?[0-9]+, "list": \[([12](, [12])*)?\]\})"))) << *text;
  }
  EXPECT_GE(num_terminated, 8);
}

TEST_F(ConstraintCompilerTest, JsonObjectWalksParse) {
  int num_terminated = 0;
  for (uint32_t seed = 0; seed < 10; ++seed) {
    // Any object may nest without bound: a longer walk.
    const std::optional<std::string> text =
        RandomWalk({.kind = OutputConstraint::Kind::kJsonObject}, seed, /*max_tokens=*/2000);
    if (!text) continue;
    ++num_terminated;
    const nlohmann::json value = nlohmann::json::parse(*text, nullptr, false);
    EXPECT_TRUE(!value.is_discarded() && value.is_object()) << *text;
  }
  EXPECT_GE(num_terminated, 3);  // deterministic: 4 of these 10 walks close their object
}

TEST_F(ConstraintCompilerTest, RegexWalksMatch) {
  const std::string pattern = "[0-9]{3}-[a-z]{2,4}( (amen|selah))?";
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const std::optional<std::string> text =
        RandomWalk({.kind = OutputConstraint::Kind::kRegex, .text = pattern}, seed);
    ASSERT_TRUE(text.has_value());
    EXPECT_TRUE(std::regex_match(*text, std::regex(pattern))) << *text;
  }
}

TEST_F(ConstraintCompilerTest, ChoiceWalksPickOneChoiceExactly) {
  const std::vector<std::string> choices = {"yes", "no", "In the beginning", "a \"quoted\"\\ line\n"};
  std::set<std::string> seen;
  for (uint32_t seed = 0; seed < 40; ++seed) {
    const std::optional<std::string> text =
        RandomWalk({.kind = OutputConstraint::Kind::kChoice, .choices = choices}, seed);
    ASSERT_TRUE(text.has_value());
    EXPECT_THAT(choices, ::testing::Contains(*text));
    seen.insert(*text);
  }
  EXPECT_GE(seen.size(), 3u);
}

TEST_F(ConstraintCompilerTest, GrammarWalksFollowTheGrammar) {
  const std::string grammar = R"(root ::= "The " name " said " number "."
name ::= "king" | "prophet" | "LORD"
number ::= [1-9] [0-9]?)";
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const std::optional<std::string> text =
        RandomWalk({.kind = OutputConstraint::Kind::kGrammar, .text = grammar}, seed);
    ASSERT_TRUE(text.has_value());
    EXPECT_TRUE(std::regex_match(*text, std::regex("The (king|prophet|LORD) said [1-9][0-9]?\\.")))
        << *text;
  }
}

TEST_F(ConstraintCompilerTest, WhatDoesNotCompileSaysWhy) {
  using Kind = OutputConstraint::Kind;
  const absl::StatusOr<std::shared_ptr<const CompiledConstraint>> bad_json =
      compiler_->Compile({.kind = Kind::kJsonSchema, .text = "{\"type\": "});
  EXPECT_EQ(bad_json.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_json.status().message(), HasSubstr("json_schema"));
  const auto bad_regex = compiler_->Compile({.kind = Kind::kRegex, .text = "(ab"});
  EXPECT_EQ(bad_regex.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_regex.status().message(), HasSubstr("regex"));
  const auto bad_grammar = compiler_->Compile({.kind = Kind::kGrammar, .text = "root ::= \"a"});
  EXPECT_EQ(bad_grammar.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_grammar.status().message(), HasSubstr("grammar"));
  const auto no_root = compiler_->Compile({.kind = Kind::kGrammar, .text = "start ::= \"a\""});
  EXPECT_EQ(no_root.status().code(), absl::StatusCode::kInvalidArgument);
  const auto no_choices = compiler_->Compile({.kind = Kind::kChoice});
  EXPECT_EQ(no_choices.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_choices.status().message(), HasSubstr("empty"));
}

// Abuse: deeply nested input is refused, not a stack overflow (xgrammar guards its recursion).
TEST_F(ConstraintCompilerTest, DeepNestingIsRefusedNotACrash) {
  using Kind = OutputConstraint::Kind;
  const int depth = 100000;
  const std::string regex = std::string(depth, '(') + "a" + std::string(depth, ')');
  EXPECT_FALSE(compiler_->Compile({.kind = Kind::kRegex, .text = regex}).ok());
  const std::string grammar = "root ::= " + std::string(depth, '(') + "\"a\"" + std::string(depth, ')');
  EXPECT_FALSE(compiler_->Compile({.kind = Kind::kGrammar, .text = grammar}).ok());
  std::string schema;
  for (int i = 0; i < depth; ++i) schema += R"({"type": "array", "items": )";
  schema += R"({"type": "integer"})" + std::string(depth, '}');
  EXPECT_FALSE(compiler_->Compile({.kind = Kind::kJsonSchema, .text = schema}).ok());
}

TEST_F(ConstraintCompilerTest, ATokenOutsideTheGrammarIsRefused) {
  const auto compiled = compiler_->Compile({.kind = OutputConstraint::Kind::kChoice, .choices = {"yes"}});
  ASSERT_TRUE(compiled.ok());
  ConstraintMatcher matcher = compiler_->NewMatcher(*compiled);
  const std::vector<int32_t> no = tokenizer_->Encode("no", /*add_special_tokens=*/false);
  ASSERT_FALSE(no.empty());
  EXPECT_EQ(matcher.AcceptToken(no[0]).code(), absl::StatusCode::kFailedPrecondition);
  // The stop token only once the output is complete.
  EXPECT_EQ(matcher.AcceptToken(kStopIds[1]).code(), absl::StatusCode::kFailedPrecondition);
  for (const int32_t id : tokenizer_->Encode("yes", false)) ASSERT_TRUE(matcher.AcceptToken(id).ok());
  EXPECT_FALSE(matcher.IsTerminated());
  ASSERT_TRUE(matcher.AcceptToken(kStopIds[0]).ok());
  EXPECT_TRUE(matcher.IsTerminated());
}

TEST_F(ConstraintCompilerTest, ChoiceGrammarEscapesItsLiterals) {
  EXPECT_EQ(ChoiceGrammar({"a\"b", "c\\d", "e\nf"}), "root ::= \"a\\\"b\" | \"c\\\\d\" | \"e\\u000af\"");
}

TEST_F(ConstraintCompilerTest, AModelVocabularySmallerThanTheTokenizersIsRefused) {
  const auto compiler = ConstraintCompiler::Create(*tokenizer_, ReadFile(TokenizerPath()), 100, kStopIds);
  EXPECT_EQ(compiler.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace baton::runtime
