#include "runtime/tokenizer/jinja/parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/status_matchers.h"

namespace baton::runtime::jinja {
namespace {

using absl_testing::StatusIs;
using testing::HasSubstr;

absl::StatusOr<StmtList> ParseSource(std::string_view source) {
  absl::StatusOr<std::vector<Token>> tokens = Tokenize(source);
  if (!tokens.ok()) return tokens.status();
  return Parse(*std::move(tokens));
}

const Expr& OutputExpr(const StmtList& body) { return *body.at(0)->expr; }

TEST(JinjaParserTest, FiltersBindTighterThanArithmetic) {
  absl::StatusOr<StmtList> body = ParseSource("{{ messages|length - 1 }}");
  ASSERT_TRUE(body.ok()) << body.status();
  const Expr& e = OutputExpr(*body);
  ASSERT_EQ(e.kind, Expr::Kind::kBinary);
  EXPECT_EQ(e.name, "-");
  EXPECT_EQ(e.args[0]->kind, Expr::Kind::kFilter);
}

TEST(JinjaParserTest, NotAppliesToATest) {
  absl::StatusOr<StmtList> body = ParseSource("{{ not x is defined and y }}");
  ASSERT_TRUE(body.ok()) << body.status();
  const Expr& e = OutputExpr(*body);
  ASSERT_EQ(e.name, "and");
  EXPECT_EQ(e.args[0]->kind, Expr::Kind::kUnary);
  EXPECT_EQ(e.args[0]->args[0]->kind, Expr::Kind::kTest);
}

TEST(JinjaParserTest, SlicesAndConditionals) {
  absl::StatusOr<StmtList> body = ParseSource("{{ a[::-1] if c else b[1:] }}");
  ASSERT_TRUE(body.ok()) << body.status();
  const Expr& e = OutputExpr(*body);
  ASSERT_EQ(e.kind, Expr::Kind::kConditional);
  EXPECT_EQ(e.args[1]->kind, Expr::Kind::kSlice);
  EXPECT_EQ(e.args[1]->args[1], nullptr);  // no start
  EXPECT_NE(e.args[1]->args[3], nullptr);  // step
}

TEST(JinjaParserTest, StatementsNest) {
  absl::StatusOr<StmtList> body = ParseSource(
      "{% for k, v in d.items() if k != 'x' %}{% if v %}{% break %}{% elif k %}{% continue %}"
      "{% else %}{% set ns.n = 1 %}{% endif %}{% else %}empty{% endfor %}"
      "{% macro m(a, b=2) %}{{ a }}{% endmacro %}{% set blk | trim %} x {% endset %}"
      "{% filter upper %}y{% endfilter %}{% generation %}z{% endgeneration %}");
  ASSERT_TRUE(body.ok()) << body.status();
  ASSERT_EQ(body->size(), 5u);
  const Stmt& loop = *(*body)[0];
  EXPECT_EQ(loop.kind, Stmt::Kind::kFor);
  EXPECT_TRUE(loop.target.is_tuple);
  EXPECT_NE(loop.condition, nullptr);
  EXPECT_EQ(loop.body[0]->conditions.size(), 2u);
  EXPECT_EQ(loop.else_body.size(), 1u);
  EXPECT_EQ((*body)[1]->params.size(), 2u);
  EXPECT_EQ((*body)[2]->kind, Stmt::Kind::kSetBlock);
  EXPECT_EQ((*body)[3]->kind, Stmt::Kind::kFilterBlock);
  EXPECT_EQ((*body)[4]->kind, Stmt::Kind::kGeneration);
}

TEST(JinjaParserTest, UnsupportedAndUnknownTagsNameTheLine) {
  EXPECT_THAT(ParseSource("a\nb\n{% include 'x.jinja' %}").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("chat template line 3: unsupported tag 'include'")));
  EXPECT_THAT(ParseSource("{% frobnicate %}").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown tag 'frobnicate'")));
  EXPECT_THAT(ParseSource("{% break %}").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outside of a for loop")));
  EXPECT_THAT(ParseSource("{% for x in y recursive %}{% endfor %}").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("recursive")));
  EXPECT_THAT(ParseSource("{% if x %}").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("missing '{% endif %}'")));
  EXPECT_THAT(ParseSource("{{ f(*args) }}").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("*args")));
}

TEST(JinjaParserTest, DeepNestingIsResourceExhausted) {
  std::string source = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_THAT(ParseSource(source).status(), StatusIs(absl::StatusCode::kResourceExhausted));
  std::string blocks;
  for (int i = 0; i < 1000; ++i) blocks += "{% if x %}";
  EXPECT_THAT(ParseSource(blocks).status(), StatusIs(absl::StatusCode::kResourceExhausted));
}

}  // namespace
}  // namespace baton::runtime::jinja
