#include "runtime/tokenizer/jinja/value.h"

#include <gtest/gtest.h>

#include "runtime/tokenizer/jinja/json_value.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime::jinja {
namespace {

TEST(JinjaValueTest, FloatsPrintAsPythonRepr) {
  EXPECT_EQ(FormatPythonFloat(1.0), "1.0");
  EXPECT_EQ(FormatPythonFloat(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(FormatPythonFloat(1e20), "1e+20");
  EXPECT_EQ(FormatPythonFloat(1e16), "1e+16");
  EXPECT_EQ(FormatPythonFloat(1e15), "1000000000000000.0");
  EXPECT_EQ(FormatPythonFloat(1.5e-5), "1.5e-05");
  EXPECT_EQ(FormatPythonFloat(0.0001), "0.0001");
  EXPECT_EQ(FormatPythonFloat(-0.0), "-0.0");
  EXPECT_EQ(FormatPythonFloat(123456789.125), "123456789.125");
}

TEST(JinjaValueTest, ReprAndStrFollowPython) {
  Value list = Value::List({Value::String("it's"), Value::String("a\"b"), Value::None(),
                            Value::Bool(true), Value::Int(-3), Value::Float(2.0)});
  EXPECT_EQ(list.Str(), "[\"it's\", 'a\"b', None, True, -3, 2.0]");
  EXPECT_EQ(Value::List({Value::Int(1)}, true).Str(), "(1,)");
  EXPECT_EQ(Value::Dict({{Value::String("k"), Value::String("v\n")}}).Str(), "{'k': 'v\\n'}");
  EXPECT_EQ(Value::Undefined("x").Str(), "");
  EXPECT_EQ(PythonStringRepr("both ' and \""), "'both \\' and \"'");
}

TEST(JinjaValueTest, TruthinessAndEquality) {
  EXPECT_FALSE(Value().Truthy());
  EXPECT_FALSE(Value::String("").Truthy());
  EXPECT_FALSE(Value::List({}).Truthy());
  EXPECT_TRUE(Value::Sequence({}, Value::Seq::kGenerator).Truthy());
  EXPECT_TRUE(Value::Dict({}, /*is_namespace=*/true).Truthy());
  EXPECT_TRUE(Equals(Value::Int(1), Value::Float(1.0)));
  EXPECT_TRUE(Equals(Value::Bool(true), Value::Int(1)));
  EXPECT_FALSE(Equals(Value::String("1"), Value::Int(1)));
  EXPECT_FALSE(Equals(Value::List({}), Value::List({}, true)));
  EXPECT_FALSE(LessThan(Value::String("a"), Value::Int(1)).ok());
}

TEST(JinjaValueTest, JsonRoundTripKeepsKeyOrder) {
  auto json = nlohmann::ordered_json::parse(R"({"z": 1, "a": [true, null, 2.5, "é\n"]})");
  absl::StatusOr<Value> v = FromJson(json);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*DumpJson(*v, {}), R"({"z": 1, "a": [true, null, 2.5, "é\n"]})");
  JsonDumpOptions ascii;
  ascii.ensure_ascii = true;
  EXPECT_EQ(*DumpJson(Value::String("é😀"), ascii), R"("\u00e9\ud83d\ude00")");
  JsonDumpOptions indented;
  indented.indent = "  ";
  indented.item_separator = ",";
  indented.sort_keys = true;
  EXPECT_EQ(*DumpJson(*v, indented),
            "{\n  \"a\": [\n    true,\n    null,\n    2.5,\n    \"é\\n\"\n  ],\n  \"z\": 1\n}");
  EXPECT_FALSE(DumpJson(Value::Undefined(), {}).ok());
}

TEST(JinjaValueTest, DeepJsonIsRejected) {
  std::string deep = std::string(1000, '[') + std::string(1000, ']');
  EXPECT_FALSE(FromJson(nlohmann::ordered_json::parse(deep)).ok());
}

}  // namespace
}  // namespace baton::runtime::jinja
