#include "runtime/tokenizer/jinja/lexer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/status_matchers.h"

namespace baton::runtime::jinja {
namespace {

using absl_testing::StatusIs;
using testing::HasSubstr;
using T = Token::Type;

std::vector<T> Types(const std::vector<Token>& tokens) {
  std::vector<T> types;
  for (const Token& t : tokens) types.push_back(t.type);
  return types;
}

std::string Texts(std::string_view source) {
  absl::StatusOr<std::vector<Token>> tokens = Tokenize(source);
  EXPECT_TRUE(tokens.ok()) << tokens.status();
  std::string out;
  for (const Token& t : *tokens) {
    if (t.type == T::kText) out += "[" + t.text + "]";
  }
  return out;
}

TEST(JinjaLexerTest, SplitsTextAndTags) {
  absl::StatusOr<std::vector<Token>> tokens = Tokenize("a{{ x.y|f(1, 'z') }}b{% if n >= 2 %}c");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(Types(*tokens),
            (std::vector<T>{T::kText, T::kVariableBegin, T::kName, T::kOperator, T::kName,
                            T::kOperator, T::kName, T::kOperator, T::kInteger, T::kOperator,
                            T::kString, T::kOperator, T::kVariableEnd, T::kText, T::kBlockBegin,
                            T::kName, T::kName, T::kOperator, T::kInteger, T::kBlockEnd, T::kText,
                            T::kEof}));
  EXPECT_EQ((*tokens)[17].text, ">=");
}

TEST(JinjaLexerTest, DecodesStringEscapesAsPython) {
  absl::StatusOr<std::vector<Token>> tokens = Tokenize(R"({{ 'a\n\t\'\u00e9\x41\d' "q\"" }})");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ((*tokens)[1].text, "a\n\t'\xc3\xa9" "A\\d");
  EXPECT_EQ((*tokens)[2].text, "q\"");
}

TEST(JinjaLexerTest, NumbersIntAndFloat) {
  absl::StatusOr<std::vector<Token>> tokens = Tokenize("{{ 1_000 2.5 1e3 x.0 }}");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ((*tokens)[1].int_value, 1000);
  EXPECT_EQ((*tokens)[2].float_value, 2.5);
  EXPECT_EQ((*tokens)[3].type, T::kFloat);
  EXPECT_EQ((*tokens)[6].type, T::kInteger);  // x . 0
}

TEST(JinjaLexerTest, TrimBlocksAndLstripBlocks) {
  EXPECT_EQ(Texts("  {% if x %}\n  body\n  {% endif %}\nend"), "[  body\n][end]");
  // Variables are not lstripped, and `}}` keeps its newline.
  EXPECT_EQ(Texts("  {{ x }}\nend"), "[  ][\nend]");
  // Comments strip like blocks.
  EXPECT_EQ(Texts("a\n  {# c #}\nb"), "[a\n][b]");
}

TEST(JinjaLexerTest, DashAndPlusControlWhitespace) {
  EXPECT_EQ(Texts("a \n {{- x -}} \n b"), "[a][b]");
  EXPECT_EQ(Texts("a\n  {%+ if x %}b"), "[a\n  ][b]");
  EXPECT_EQ(Texts("{% if x +%}\nb"), "[\nb]");
}

TEST(JinjaLexerTest, DropsOneTrailingNewlineAndNormalizesCr) {
  EXPECT_EQ(Texts("a\r\nb\n\n"), "[a\nb\n]");
}

TEST(JinjaLexerTest, BracesInsideTagsDoNotEndThem) {
  absl::StatusOr<std::vector<Token>> tokens = Tokenize("{{ {'a': {'b': 1}} }}");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->back().type, T::kEof);
  EXPECT_EQ((*tokens)[tokens->size() - 2].type, T::kVariableEnd);
}

TEST(JinjaLexerTest, ErrorsNameTheLine) {
  EXPECT_THAT(Tokenize("a\nb\n{{ 'open").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 3")));
  EXPECT_THAT(Tokenize("{# never closed").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unterminated comment")));
  EXPECT_THAT(Tokenize("{{ x $ }}").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unexpected character")));
  EXPECT_THAT(Tokenize("{{ x ").status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace baton::runtime::jinja
