// The interpreter end to end through Template: scoping, loops, macros, undefined semantics and
// the resource guards.
#include "runtime/tokenizer/jinja/template.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/tokenizer/jinja/json_value.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime::jinja {
namespace {

using absl_testing::StatusIs;
using testing::HasSubstr;

absl::StatusOr<std::string> Render(std::string_view source, std::string_view vars_json = "{}",
                                   RenderOptions options = {}) {
  absl::StatusOr<Template> t = Template::Parse(source);
  if (!t.ok()) return t.status();
  std::vector<std::pair<std::string, Value>> vars;
  auto json = nlohmann::ordered_json::parse(vars_json);
  for (auto it = json.begin(); it != json.end(); ++it) vars.emplace_back(it.key(), *FromJson(it.value()));
  return t->Render(vars, options);
}

std::string MustRender(std::string_view source, std::string_view vars_json = "{}") {
  absl::StatusOr<std::string> out = Render(source, vars_json);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.value_or("<error>");
}

TEST(JinjaRenderTest, LoopBodiesHaveTheirOwnScopeButNamespacesPersist) {
  EXPECT_EQ(MustRender("{% set x = 0 %}{% for i in range(3) %}{{ x }}{% set x = x + 1 %}{{ x }};"
                       "{% endfor %}{{ x }}"),
            "01;01;01;0");
  EXPECT_EQ(MustRender("{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}"
                       "{% endfor %}{{ ns.n }}"),
            "3");
  EXPECT_EQ(MustRender("{% if true %}{% set z = 3 %}{% endif %}{{ z }}"), "3");
}

TEST(JinjaRenderTest, LoopVariables) {
  EXPECT_EQ(MustRender("{% for x in 'abc' %}{{ loop.index }}{{ loop.revindex0 }}{{ loop.first }}"
                       "{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('+', '-') }}|{% endfor %}"),
            "12Trueb+|21Falseac-|30Falseb+|");
  EXPECT_EQ(MustRender("{% for x in [1, 2, 3, 4] if x is even %}{{ x }}/{{ loop.length }}"
                       "{% endfor %}"),
            "2/24/2");
  EXPECT_EQ(MustRender("{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}"
                       "{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "13");
  EXPECT_EQ(MustRender("{% for x in [] %}a{% else %}none{% endfor %}"), "none");
}

TEST(JinjaRenderTest, MacrosWithDefaultsAndRecursion) {
  EXPECT_EQ(MustRender("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                       "{{ greet('a') }} {{ greet('b', punct='?') }}"),
            "Hi a! Hi b?");
  EXPECT_EQ(MustRender("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}"
                       "{{ f(3) }}"),
            "321");
  EXPECT_THAT(Render("{% macro f(a) %}{% endmacro %}{{ f(1, 2) }}").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("takes not more than")));
}

TEST(JinjaRenderTest, UndefinedFollowsJinja2Default) {
  EXPECT_EQ(MustRender("[{{ missing }}][{{ missing | length }}][{{ d.nokey }}][{{ missing is defined }}]",
                       R"({"d": {}})"),
            "[][0][][False]");
  EXPECT_THAT(Render("{{ missing.attr }}").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'missing' is undefined")));
  EXPECT_THAT(Render("{{ d.a.b }}", R"({"d": {}})").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("has no attribute 'a'")));
  EXPECT_THAT(Render("{{ 1 + missing }}").status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(JinjaRenderTest, AttributeAndItemLookup) {
  EXPECT_EQ(MustRender("{{ m.role }} {{ m['role'] }} {{ m.get('x', 'dflt') }} {{ l[-1] }} {{ l[1:] }}"
                       " {{ s[::-1] }} {{ s[1] }}",
                       R"({"m": {"role": "user"}, "l": [1, 2, 3], "s": "héllo"})"),
            "user user dflt 3 [2, 3] olléh é");
  EXPECT_EQ(MustRender("{% for k, v in m.items() %}{{ k }}={{ v }}{% endfor %}", R"({"m": {"a": 1}})"),
            "a=1");
}

TEST(JinjaRenderTest, RaiseExceptionKeepsTheTemplatesMessage) {
  EXPECT_THAT(Render("{{ raise_exception('Roles must alternate') }}").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "Roles must alternate"));
}

TEST(JinjaRenderTest, MutationIsRefusedAsInTheImmutableSandbox) {
  EXPECT_THAT(Render("{{ l.append(1) }}", R"({"l": []})").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unsafe")));
}

TEST(JinjaRenderTest, StrftimeNowUsesTheInjectedClock) {
  RenderOptions options;
  options.now = 0;
  setenv("TZ", "UTC", 1);
  tzset();
  EXPECT_EQ(*Render("{{ strftime_now('%Y-%m-%d') }}", "{}", options), "1970-01-01");
}

TEST(JinjaRenderTest, GuardsFailWithResourceExhausted) {
  RenderOptions small;
  small.limits.max_output_bytes = 1000;
  small.limits.max_iterations = 100;
  EXPECT_THAT(Render("{% for i in range(1000) %}x{% endfor %}", "{}", small).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("loop iterations")));
  EXPECT_THAT(Render("{{ 'x' * 100000 }}", "{}", small).status(),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(Render("{% for i in range(50) %}{{ 'y' * 100 }}{% endfor %}", "{}", small).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("output exceeds")));
  EXPECT_THAT(Render("{{ range(10000000000) }}").status(),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(Render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").status(),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(Render("{% set ns = namespace(x=[]) %}{% for i in range(200) %}{% set ns.x = [ns.x] %}"
                     "{% endfor %}").status(),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(Render("{% set ns = namespace() %}{% set ns.me = ns %}").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(JinjaRenderTest, UnknownFiltersAndTestsFailAtParseTime) {
  EXPECT_THAT(Template::Parse("{% if false %}{{ x | nope }}{% endif %}").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unsupported filter 'nope'")));
  EXPECT_THAT(Template::Parse("{{ x is nope }}").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unsupported test 'nope'")));
}

}  // namespace
}  // namespace baton::runtime::jinja
