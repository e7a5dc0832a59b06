#include "runtime/tokenizer/jinja/filters.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/tokenizer/jinja/json_value.h"
#include "runtime/tokenizer/jinja/tests.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime::jinja {
namespace {

const SizeLimits kLimits{1 << 20, 1 << 16};

Value Json(std::string_view text) { return *FromJson(nlohmann::ordered_json::parse(text)); }

std::string Apply(std::string_view name, const Value& input, CallArgs args = {}) {
  absl::StatusOr<Value> v = ApplyFilter(name, input, args, kLimits);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? v->Str() : "<error>";
}

CallArgs Pos(std::vector<Value> positional) { return CallArgs{std::move(positional), {}}; }
CallArgs Kw(std::string key, Value v) { return CallArgs{{}, {{std::move(key), std::move(v)}}}; }

TEST(JinjaFiltersTest, Strings) {
  EXPECT_EQ(Apply("trim", Value::String(" \n x \t")), "x");
  EXPECT_EQ(Apply("upper", Value::String("straße")), "STRASSE");
  EXPECT_EQ(Apply("title", Value::String("hello wORLD ça")), "Hello World Ça");
  // jinja2's title splits on whitespace and "-({[<" only, unlike str.title().
  EXPECT_EQ(Apply("title", Value::String("{\"temp\": x-ray")), "{\"temp\": X-Ray");
  EXPECT_EQ(Apply("capitalize", Value::String("hELLO")), "Hello");
  EXPECT_EQ(Apply("replace", Value::String("a-b-c"), Pos({Value::String("-"), Value::String("+")})),
            "a+b+c");
  EXPECT_EQ(Apply("indent", Value::String("a\nb\n\nc"), Pos({Value::Int(2)})), "a\n  b\n\n  c");
  EXPECT_EQ(Apply("center", Value::String("hi"), Pos({Value::Int(7)})), "   hi  ");
  EXPECT_EQ(Apply("escape", Value::String("<a href='x'>&")), "&lt;a href=&#39;x&#39;&gt;&amp;");
  EXPECT_EQ(Apply("wordcount", Value::String("one, two — três")), "3");
  EXPECT_EQ(Apply("length", Value::String("héllo")), "5");
}

TEST(JinjaFiltersTest, ToJsonIsTransformersOverride) {
  Value v = Json(R"({"b": "é<", "a": [1, 2.0]})");
  EXPECT_EQ(Apply("tojson", v), R"({"b": "é<", "a": [1, 2.0]})");
  EXPECT_EQ(Apply("tojson", v, Kw("indent", Value::Int(2))),
            "{\n  \"b\": \"é<\",\n  \"a\": [\n    1,\n    2.0\n  ]\n}");
  EXPECT_EQ(Apply("tojson", v, Kw("sort_keys", Value::Bool(true))), R"({"a": [1, 2.0], "b": "é<"})");
  EXPECT_EQ(Apply("tojson", v, Kw("ensure_ascii", Value::Bool(true))),
            R"({"b": "\u00e9<", "a": [1, 2.0]})");
}

TEST(JinjaFiltersTest, Sequences) {
  Value messages = Json(R"([{"role": "system"}, {"role": "user"}, {"role": "User"}])");
  EXPECT_EQ(Apply("list", *ApplyFilter("map", messages, Kw("attribute", Value::String("role")), kLimits)),
            "['system', 'user', 'User']");
  Value selected = *ApplyFilter("selectattr", messages,
                                Pos({Value::String("role"), Value::String("equalto"), Value::String("user")}),
                                kLimits);
  EXPECT_TRUE(selected.is_generator());
  EXPECT_EQ(Apply("list", selected), "[{'role': 'user'}]");
  EXPECT_FALSE(ApplyFilter("length", selected, {}, kLimits).ok());  // generators have no len()
  Value roles = Json(R"(["b", "A", "c", "a"])");
  EXPECT_EQ(Apply("sort", roles), "['A', 'a', 'b', 'c']");
  EXPECT_EQ(Apply("list", *ApplyFilter("unique", roles, {}, kLimits)), "['b', 'A', 'c']");
  EXPECT_EQ(Apply("join", roles, Pos({Value::String(",")})), "b,A,c,a");
  EXPECT_EQ(Apply("first", roles), "b");
  EXPECT_EQ(Apply("last", roles), "a");
  EXPECT_EQ(Apply("dictsort", Json(R"({"b": 1, "a": 2})")), "[('a', 2), ('b', 1)]");
  EXPECT_EQ(Apply("items", Json(R"({"k": [1]})")), "[('k', [1])]");
  EXPECT_EQ(Apply("default", Value::Undefined(), Pos({Value::String("d")})), "d");
  EXPECT_EQ(Apply("default", Value::String(""), Pos({Value::String("d"), Value::Bool(true)})), "d");
}

TEST(JinjaFiltersTest, Numbers) {
  EXPECT_EQ(Apply("int", Value::String(" 42 ")), "42");
  EXPECT_EQ(Apply("int", Value::String("4.7")), "4");
  EXPECT_EQ(Apply("int", Value::String("x")), "0");
  EXPECT_EQ(Apply("float", Value::Int(3)), "3.0");
  EXPECT_EQ(Apply("round", Value::Float(2.5)), "2.0");
  EXPECT_EQ(Apply("round", Value::Float(2.675), Pos({Value::Int(2)})), "2.67");
  EXPECT_EQ(Apply("abs", Value::Int(-3)), "3");
  EXPECT_EQ(Apply("sum", Json("[1, 2, 3.5]")), "6.5");
}

TEST(JinjaFiltersTest, Tests) {
  EXPECT_TRUE(*ApplyTest("defined", Value::None(), {}));
  EXPECT_TRUE(*ApplyTest("iterable", Value::Undefined(), {}));
  EXPECT_TRUE(*ApplyTest("sequence", Json("{}"), {}));
  EXPECT_FALSE(*ApplyTest("integer", Value::Bool(true), {}));
  EXPECT_TRUE(*ApplyTest("number", Value::Bool(true), {}));
  EXPECT_TRUE(*ApplyTest("divisibleby", Value::Int(9), Pos({Value::Int(3)})));
  EXPECT_TRUE(*ApplyTest("equalto", Value::Int(1), Pos({Value::Float(1.0)})));
  EXPECT_FALSE(*ApplyTest("false", Value::Int(0), {}));
  EXPECT_FALSE(ApplyTest("nope", Value::Int(0), {}).ok());
}

}  // namespace
}  // namespace baton::runtime::jinja
