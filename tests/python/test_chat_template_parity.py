"""Byte-for-byte parity of Baton's chat-template engine with Python's jinja2.

Every fixture template in tests/runtime/tokenizer/chat_templates/ is rendered over many message lists
by build/bin/render_chat_template and by jinja2 set up exactly as transformers'
_compile_jinja_template does (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loopcontrols, the `generation` tag, its tojson/raise_exception/strftime_now); the outputs must be
identical, and an error in one must be an error in the other.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from datetime import datetime
from pathlib import Path

import pytest

jinja2 = pytest.importorskip("jinja2")
from jinja2.ext import Extension, loopcontrols  # noqa: E402
from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = REPO_ROOT / "tests" / "runtime" / "tokenizer" / "chat_templates"
NOW = 1_718_000_000  # a fixed clock for strftime_now on both sides


class _Generation(Extension):
    """transformers' AssistantTracker without the tracking: `{% generation %}` renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def _environment() -> ImmutableSandboxedEnvironment:
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.fromtimestamp(NOW).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[_Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


ENV = _environment()


def render_python(template: str, ctx: dict):
    """(text, None) or (None, error) as transformers' apply_chat_template(tokenize=False) renders."""
    kwargs = {k: ctx[k] for k in ("bos_token", "eos_token") if k in ctx}
    kwargs.update(ctx.get("template_kwargs", {}))
    try:
        return ENV.from_string(template).render(
            messages=ctx["messages"], tools=ctx.get("tools"), documents=ctx.get("documents"),
            add_generation_prompt=ctx.get("add_generation_prompt", False), **kwargs), None
    except Exception as e:  # noqa: BLE001 - any jinja2 error counts as "an error"
        return None, f"{type(e).__name__}: {e}"


@pytest.fixture(scope="session")
def renderer(build_dir: Path) -> Path:
    binary = build_dir / "bin" / "render_chat_template"
    if not os.access(binary, os.X_OK):
        pytest.fail(f"{binary} not found: cmake --build build --target render_chat_template",
                    pytrace=False)
    return binary


def render_baton(renderer: Path, template_path: Path, ctx: dict, tmp_path: Path, vars_mode=False):
    ctx_file = tmp_path / "ctx.json"
    ctx_file.write_text(json.dumps(ctx, ensure_ascii=False), encoding="utf-8")
    args = [str(renderer)] + (["--vars"] if vars_mode else []) + [str(template_path), str(ctx_file)]
    proc = subprocess.run(args, capture_output=True, timeout=30)
    if proc.returncode == 0:
        return proc.stdout.decode("utf-8"), None
    assert proc.returncode == 2, proc.stderr.decode()
    return None, proc.stderr.decode("utf-8")


# ---- the conversations ----

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city. Unicode: Zürich ☀",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "days": {"type": "integer"},
                "units": {"type": ["string", "null"], "enum": ["c", "f"]},
                "hours": {"type": "array", "items": {"type": "number"}},
                "extra": {"type": "object", "additionalProperties": {"type": "boolean"}},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {"name": "search", "description": "",
                 "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
                                "required": ["q"]}},
}
CALL = {"id": "call12345", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}
CALL_STR_ARGS = {"id": "abcdefghi", "type": "function",
                 "function": {"name": "search", "arguments": {"q": "naïve \"quotes\"\n"}}}

CONVERSATIONS = {
    "single_user": [{"role": "user", "content": "Hello!"}],
    "system_user": [{"role": "system", "content": "You are terse."},
                    {"role": "user", "content": "  Hi there \n"}],
    "multi_turn": [{"role": "system", "content": "Be helpful."},
                   {"role": "user", "content": "What is 2+2?"},
                   {"role": "assistant", "content": "4."},
                   {"role": "user", "content": "And 3+3?"},
                   {"role": "assistant", "content": " 6 "},
                   {"role": "user", "content": "Thanks"}],
    "no_system_multi": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                        {"role": "user", "content": "c"}],
    "unicode": [{"role": "user", "content": "Ça va? 你好 🌍 — “quotes” \\ back\tslash"},
                {"role": "assistant", "content": "Très bien ☃"},
                {"role": "user", "content": "ok\r\nnext"}],
    "empty_content": [{"role": "user", "content": ""}, {"role": "assistant", "content": ""},
                      {"role": "user", "content": " "}],
    "parts": [{"role": "user", "content": [{"type": "text", "text": "Describe "},
                                           {"type": "image"},
                                           {"type": "text", "text": " please"}]}],
    "thinking": [{"role": "user", "content": "Solve x"},
                 {"role": "assistant", "content": "<think>\nlet me see\n</think>\n\nx = 1"},
                 {"role": "user", "content": "again"}],
    "reasoning_field": [{"role": "user", "content": "q"},
                        {"role": "assistant", "content": "a", "reasoning_content": "r1"},
                        {"role": "user", "content": "q2"},
                        {"role": "assistant", "content": "a2", "reasoning_content": "r2"}],
    "tool_round": [{"role": "system", "content": "Use tools."},
                   {"role": "user", "content": "Weather in Paris?"},
                   {"role": "assistant", "content": None, "tool_calls": [CALL]},
                   {"role": "tool", "tool_call_id": "call12345", "name": "get_weather",
                    "content": "{\"temp\": 21}"},
                   {"role": "assistant", "content": "It is 21 degrees."},
                   {"role": "user", "content": "Thanks"}],
    "two_tool_results": [{"role": "user", "content": "Weather and search?"},
                         {"role": "assistant", "content": "", "tool_calls": [CALL, CALL_STR_ARGS]},
                         {"role": "tool", "tool_call_id": "call12345", "content": "sunny"},
                         {"role": "tool", "tool_call_id": "abcdefghi", "content": "found"}],
    "bad_alternation": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
    "leading_assistant": [{"role": "assistant", "content": "I start"},
                          {"role": "user", "content": "ok"}],
    "empty_list": [],
}
TOOLSETS = {"no_tools": None, "tools": [WEATHER_TOOL, SEARCH_TOOL]}
KWARGS = {"plain": {}, "no_think": {"enable_thinking": False},
          "date": {"date_string": "26 Jul 2024", "tools_in_user_message": False}}

TEMPLATE_FILES = sorted(p.name for p in TEMPLATES.glob("*.jinja"))


def _cases():
    for conv, tools, gen, kw in itertools.product(CONVERSATIONS, TOOLSETS, (False, True), KWARGS):
        if kw != "plain" and (gen is False or conv not in ("multi_turn", "tool_round", "thinking")):
            continue
        yield conv, tools, gen, kw


@pytest.mark.parametrize("template_name", TEMPLATE_FILES)
def test_fixture_templates_match_jinja2(template_name, renderer, tmp_path):
    template_path = TEMPLATES / template_name
    template = template_path.read_text(encoding="utf-8")
    num_rendered = num_errors = 0
    for conv, tools, gen, kw in _cases():
        ctx = {"messages": CONVERSATIONS[conv], "add_generation_prompt": gen,
               "bos_token": "<s>", "eos_token": "</s>", "template_kwargs": KWARGS[kw], "now": NOW}
        if TOOLSETS[tools] is not None:
            ctx["tools"] = TOOLSETS[tools]
        expected, expected_error = render_python(template, ctx)
        got, error = render_baton(renderer, template_path, ctx, tmp_path)
        where = f"{template_name} / {conv} / {tools} / add_generation_prompt={gen} / {kw}"
        if expected_error is not None:
            assert error is not None, f"{where}: jinja2 failed ({expected_error}) but Baton rendered {got!r}"
            num_errors += 1
        else:
            assert error is None, f"{where}: Baton failed: {error}\njinja2 rendered {expected!r}"
            assert got == expected, f"{where}: output differs"
            num_rendered += 1
    assert num_rendered > 0


# ---- expressions one by one (the --vars mode: the context's members are the variables) ----

EXPRESSIONS = [
    "{{ x }}|{{ x.y }}|{{ x['y'] }}|{{ l[0] }}|{{ l[-1] }}|{{ l[1:] }}|{{ l[::-1] }}|{{ s[1:3] }}",
    "{{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 0.5 }} {{ 1 / 3 }} {{ 10 / 5 }}",
    "{{ 1e-5 }} {{ 1e16 }} {{ 123456789.123 }} {{ 0.000123 }} {{ 1.0 }} {{ -0.5 }} {{ 3.14159e100 }}",
    "{{ [1, 'two', none, true, false, 1.5, [], {}] }} {{ {'a': 'b', 'c': [1]} }} {{ ('t',) }} {{ () }}",
    "{{ \"it's\" }} {{ ['it\\'s', 'say \"hi\"', 'both \\' \"'] }} {{ 'a\\nb\\tc\\\\' }} {{ ['\\n'] }}",
    "{{ x | tojson }} {{ l | tojson(indent=2) }} {{ s | tojson(ensure_ascii=true) }} {{ {} | tojson(indent=4) }}",
    "{{ 'x' if none else 'y' }} {{ ('z' if false) ~ '!' }} {{ not x }} {{ x and l }} {{ none or 0 or 'last' }}",
    "{{ u }}[{{ u | default('d') }}][{{ u | length }}][{{ u | trim }}][{{ u is defined }}][{{ u ~ 'x' }}]",
    "{% for a in u %}never{% else %}empty{% endfor %} {% for k in x %}{{ k }}{% endfor %} {% for c in s %}{{ c }}.{% endfor %}",
    "{% for k, v in x.items() %}{{ k }}={{ v }};{% endfor %} {% for k, v in x | dictsort %}{{ k }}{% endfor %}",
    "{{ s | upper }} {{ s | lower }} {{ s | title }} {{ s | capitalize }} {{ s | length }} {{ s | list }} {{ s | reverse }}",
    "{{ l | join('-') }} {{ l | first }} {{ l | last }} {{ l | length }} {{ l | sum }} {{ l | select('odd') | list }} {{ l | reject('odd') | list }}",
    "{{ l | map('string') | join }} {{ l | sort(reverse=true) }} {{ [3, 1, 3] | unique | list }} {{ l | select('gt', 1) | list }}",
    "{% set n = namespace(a=1) %}{% set n.a = n.a + 1 %}{{ n.a }} {% set t = 0 %}{% for i in l %}{% set t = t + i %}{% endfor %}{{ t }}",
    "{% if x.y is string and x.z is not defined %}ok{% elif true %}no{% else %}no{% endif %}",
    "  {% if true %}\n  indented\n  {% endif %}\n{{ 'v' }}  \n  {# comment #}\nend\n",
    "a {%- if true %} b {% endif -%} c {{- ' d ' -}} e\n{%+ if true %}keep{% endif %}\n",
    "{{ '%s' }} {{ 'a{}b' }} {{ '{{' }} {{ \"}}\" }} {{ {'k': {'n': 1}} }}",
    "{{ 5 is even }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ l is iterable }} {{ x is mapping }} {{ 1 is number }} {{ true is integer }}",
    "{{ l + [4] }} {{ 'ab' * 3 }} {{ [0] * 2 }} {{ 'a' ~ 1 ~ none }} {{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }}",
    "{{ range(5) | list }} {{ range(10, 0, -3) | list }} {{ loop is defined }} {{ 'ab'.split('') if false }}",
    "{{ '  a  b  '.split() }} {{ 'a,b'.split(',', 1) }} {{ ' x '.strip() }}|{{ 'xxhixx'.strip('x') }} {{ 'a-b'.rsplit('-', 1) }}",
]


@pytest.mark.parametrize("index", range(len(EXPRESSIONS)))
def test_expressions_match_jinja2(index, renderer, tmp_path):
    template = EXPRESSIONS[index]
    variables = {"x": {"y": "why", "k2": 2}, "l": [1, 2, 3], "s": "héllo wörld"}
    template_path = tmp_path / "t.jinja"
    template_path.write_text(template, encoding="utf-8")
    try:
        expected, expected_error = ENV.from_string(template).render(**variables), None
    except Exception as e:  # noqa: BLE001
        expected, expected_error = None, str(e)
    got, error = render_baton(renderer, template_path, variables, tmp_path, vars_mode=True)
    if expected_error is not None:
        assert error is not None, f"jinja2 failed ({expected_error}) but Baton rendered {got!r}"
    else:
        assert error is None, f"Baton failed: {error}; jinja2 rendered {expected!r}"
        assert got == expected


ERRORS = [
    ("{{ raise_exception('custom failure') }}", "custom failure"),
    ("{% include 'other.jinja' %}", "unsupported tag 'include'"),
    ("{{ u.attr }}", "'u' is undefined"),
    ("{{ 'a' + 1 }}", "unsupported operand"),
    ("{% if %}", "line 1"),
    ("x\n{{ l | no_such_filter }}", "line 2: unsupported filter 'no_such_filter'"),
    ("{% for x in l %}", "endfor"),
    ("{{ l.append(4) }}", "unsafe"),
]


@pytest.mark.parametrize("template,message", ERRORS)
def test_errors_are_errors_in_both(template, message, renderer, tmp_path):
    template_path = tmp_path / "t.jinja"
    template_path.write_text(template, encoding="utf-8")
    with pytest.raises(Exception):
        ENV.from_string(template).render(l=[1], messages=[])
    got, error = render_baton(renderer, template_path, {"l": [1]}, tmp_path, vars_mode=True)
    assert got is None
    assert error.startswith("INVALID_ARGUMENT: "), error
    assert message in error, error
