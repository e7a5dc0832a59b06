"""Tool calling and reasoning through the official `openai` client against a live `baton serve` of
the embedded default model (models/kjv-4m, a trained model) with Qwen3's chat template (its
<tool_call> format: --tool-call-parser hermes, --reasoning-parser qwen3), on colocated and
disaggregated deployments: tool_choice required and named (forced by the grammar) and auto (read
out of what the model writes), streamed and not, calls sent back as history, and the 400s.

This model was never taught to call tools, so where a test needs the model to write a call of its
own (auto), a regex constraint makes it write one; everything after the text is the parser's."""

from __future__ import annotations

import json
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

openai = pytest.importorskip("openai")

from serving_fixtures import DeploymentFactory  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "kjv-4m"
QWEN3_TEMPLATE = ROOT / "tests" / "runtime" / "tokenizer" / "chat_templates" / "qwen_like.jinja"
QUESTION = [{"role": "user", "content": "What is the weather in Oslo?"}]
CITIES = ["Paris", "Oslo", "Rome"]
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city.",
        "parameters": {"type": "object",
                       "properties": {"city": {"enum": CITIES}, "unit": {"enum": ["celsius", "fahrenheit"]}},
                       "required": ["city"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "get_time", "description": "The time now."}},
]


def valid_call(call) -> bool:
    arguments = json.loads(call.function.arguments)
    if call.function.name == "get_weather":
        return (arguments.get("city") in CITIES and set(arguments) <= {"city", "unit"}
                and arguments.get("unit", "celsius") in ("celsius", "fahrenheit"))
    return call.function.name == "get_time" and isinstance(arguments, dict)


@pytest.fixture(scope="module", params=["colocated", "disaggregated"])
def deployment(request, baton_binary, tmp_path_factory):
    factory = DeploymentFactory(baton_binary, MODEL, tmp_path_factory.mktemp(f"tools-{request.param}"))
    yield factory.start(f"tools-{request.param}", mode=request.param, http=True,
                        config={"chat_template": str(QWEN3_TEMPLATE), "tool_call_parser": "hermes",
                                "enable_auto_tool_choice": True, "reasoning_parser": "qwen3"})
    problems = factory.stop_all()
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def oai(deployment):
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{deployment.http_port}/v1", api_key="unused",
                           timeout=120, max_retries=0)
    yield client
    client.close()


def ask(oai, **kwargs):
    return oai.chat.completions.create(model="kjv-4m", messages=kwargs.pop("messages", QUESTION), tools=TOOLS,
                                       temperature=1, max_tokens=kwargs.pop("max_tokens", 400), **kwargs)


def streamed_message(stream):
    """The message of a streamed answer, checking OpenAI's order: each call's id and name first
    (with no arguments yet), then argument pieces without a name."""
    content, reasoning, calls, finish = "", "", [], []
    for chunk in stream:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        delta = choice.delta
        content += delta.content or ""
        reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
        for call in delta.tool_calls or []:
            if call.index == len(calls):
                assert call.id and call.type == "function" and call.function.name, call
                assert call.function.arguments == "", call
                calls.append({"id": call.id, "name": call.function.name, "arguments": ""})
            else:
                assert call.index < len(calls) and call.id is None and not call.function.name, call
                calls[call.index]["arguments"] += call.function.arguments
        if choice.finish_reason:
            finish.append(choice.finish_reason)
    return content, reasoning, calls, finish


@pytest.mark.engine
def test_required_calls_come_back_as_the_clients_tool_calls(oai):
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda seed: ask(oai, tool_choice="required", parallel_tool_calls=False, seed=seed),
                                range(20)))
    ids = set()
    for answer in answers:
        message = answer.choices[0].message
        assert answer.choices[0].finish_reason == "tool_calls", message
        assert message.content is None and len(message.tool_calls) == 1, message
        call = message.tool_calls[0]
        assert isinstance(call, openai.types.chat.ChatCompletionMessageToolCall)
        assert call.id.startswith("call_") and call.id not in ids
        ids.add(call.id)
        assert valid_call(call), call
    assert len({a.choices[0].message.tool_calls[0].function.arguments for a in answers}) > 1  # sampled


@pytest.mark.engine
def test_parallel_required_calls_are_each_valid(oai):
    # This model never stops listing calls; what it completed before max_tokens is each a valid call.
    answer = ask(oai, tool_choice="required", seed=1, max_tokens=120)
    calls = answer.choices[0].message.tool_calls
    done = calls if answer.choices[0].finish_reason == "tool_calls" else calls[:-1]
    assert len(done) >= 1 and all(valid_call(call) for call in done), calls


@pytest.mark.engine
def test_a_named_choice_calls_that_function(oai):
    for seed in range(5):
        answer = ask(oai, tool_choice={"type": "function", "function": {"name": "get_weather"}}, seed=seed)
        message = answer.choices[0].message
        assert answer.choices[0].finish_reason == "stop", message
        assert [call.function.name for call in message.tool_calls] == ["get_weather"]
        assert valid_call(message.tool_calls[0]), message


@pytest.mark.engine
@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_streamed_calls_are_the_whole_answers(oai, tool_choice):
    for seed in (3, 4):
        whole = ask(oai, tool_choice=tool_choice, seed=seed, parallel_tool_calls=False).choices[0]
        content, _, calls, finish = streamed_message(
            ask(oai, tool_choice=tool_choice, seed=seed, parallel_tool_calls=False, stream=True))
        assert finish == [whole.finish_reason]
        assert content == ""
        assert [(c["name"], c["arguments"]) for c in calls] == [
            (c.function.name, c.function.arguments) for c in whole.message.tool_calls]


# The hermes format, as Qwen writes it, forced on a model that never learned it.
HERMES_CALL = r'<tool_call>\n\{"name": "get_weather", "arguments": \{"city": "(Paris|Oslo|Rome)"\}\}\n</tool_call>'


@pytest.mark.engine
def test_auto_reads_the_calls_the_model_writes(oai):
    for seed in range(3):
        answer = ask(oai, seed=seed, extra_body={"structured_outputs": {"regex": HERMES_CALL}})
        message = answer.choices[0].message
        assert answer.choices[0].finish_reason == "tool_calls", message
        assert message.content is None
        assert [call.function.name for call in message.tool_calls] == ["get_weather"]
        assert json.loads(message.tool_calls[0].function.arguments)["city"] in CITIES
        content, _, calls, finish = streamed_message(
            ask(oai, seed=seed, stream=True, extra_body={"structured_outputs": {"regex": HERMES_CALL}}))
        assert finish == ["tool_calls"] and content == ""
        assert [(c["name"], c["arguments"]) for c in calls] == [
            (c.function.name, c.function.arguments) for c in message.tool_calls]


@pytest.mark.engine
def test_auto_without_a_call_is_plain_content(oai):
    answer = ask(oai, tool_choice="auto", seed=1, extra_body={"guided_choice": ["Amen", "Selah"]})
    message = answer.choices[0].message
    assert message.content in ("Amen", "Selah") and not message.tool_calls
    assert answer.choices[0].finish_reason == "stop"


@pytest.mark.engine
def test_reasoning_is_split_from_the_content(oai):
    think = {"structured_outputs": {"regex": r"<think>\n[a-z]{2,8}( [a-z]{2,8}){1,4}\n</think>\n\n(Amen|Selah)"}}
    answer = oai.chat.completions.create(model="kjv-4m", messages=QUESTION, temperature=1, seed=2, max_tokens=200,
                                         extra_body=think)
    message = answer.choices[0].message
    reasoning = message.model_extra["reasoning_content"]
    assert message.content in ("\n\nAmen", "\n\nSelah"), message
    assert reasoning.startswith("\n") and reasoning.endswith("\n") and "<think>" not in reasoning, reasoning
    content, streamed_reasoning, calls, finish = streamed_message(oai.chat.completions.create(
        model="kjv-4m", messages=QUESTION, temperature=1, seed=2, max_tokens=200, extra_body=think, stream=True))
    assert (content, streamed_reasoning, calls, finish) == (message.content, reasoning, [], ["stop"])


@pytest.mark.engine
def test_calls_go_back_to_the_model_as_history(oai, deployment):
    history = [*QUESTION,
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "call_1", "type": "function",
                    "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
               {"role": "tool", "tool_call_id": "call_1", "content": "-3 C, snow"}]
    request = urllib.request.Request(f"http://127.0.0.1:{deployment.http_port}/tokenize",
                                     data=json.dumps({"model": "kjv-4m", "messages": history, "tools": TOOLS}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        tokens = json.loads(response.read())["tokens"]
    request = urllib.request.Request(f"http://127.0.0.1:{deployment.http_port}/detokenize",
                                     data=json.dumps({"model": "kjv-4m", "tokens": tokens}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        prompt = json.loads(response.read())["prompt"]
    # The arguments went to the template as an object (it prints them with tojson), as vLLM hands them.
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>' in prompt, prompt
    assert "<tool_response>\n-3 C, snow\n</tool_response>" in prompt, prompt
    assert '"name": "get_time"' in prompt  # the tools reach the system prompt
    answer = ask(oai, messages=history, seed=5, max_tokens=8)
    assert answer.choices[0].finish_reason in ("stop", "length", "tool_calls")


@pytest.mark.engine
def test_bad_tool_requests_are_400s_naming_the_problem(oai):
    cases = [
        ({"tool_choice": {"type": "function", "function": {"name": "launch"}}}, "'launch', which is not in 'tools'"),
        ({"tool_choice": "required", "response_format": {"type": "json_object"}}, "cannot be combined"),
        ({"tool_choice": "sometimes"}, "'tool_choice' must be"),
        ({"tools": [{"type": "function", "function": {"parameters": {}}}]}, "tools[0].function.name"),
    ]
    for body, words in cases:
        body = {"tools": TOOLS, **body}
        with pytest.raises(openai.BadRequestError) as error:
            oai.chat.completions.create(model="kjv-4m", messages=QUESTION, max_tokens=8,
                                        extra_body=body)
        assert words in str(error.value), (body, str(error.value))


# Llama 3's and Mistral's formats, each with its own template: the model (made to) write a call,
# and the call sent back as history through that template (Mistral's takes only 9-character ids).
OTHER_FORMATS = {
    "llama3_json": ("llama3_tools_like.jinja",
                    r'\{"name": "get_weather", "parameters": \{"city": "(Paris|Oslo|Rome)"\}\}'),
    "mistral": ("mistral_tools_like.jinja",
                r'\[TOOL_CALLS\] \[\{"name": "get_weather", "arguments": \{"city": "(Paris|Oslo|Rome)"\}\}\]'),
}


@pytest.fixture(scope="module", params=sorted(OTHER_FORMATS))
def other_format(request, baton_binary, tmp_path_factory):
    template, regex = OTHER_FORMATS[request.param]
    factory = DeploymentFactory(baton_binary, MODEL, tmp_path_factory.mktemp(f"tools-{request.param}"))
    deployment = factory.start(f"tools-{request.param}", mode="colocated", http=True,
                               config={"chat_template": str(QWEN3_TEMPLATE.parent / template),
                                       "tool_call_parser": request.param, "enable_auto_tool_choice": True})
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{deployment.http_port}/v1", api_key="unused",
                           timeout=120, max_retries=0)
    yield request.param, client, regex
    client.close()
    problems = factory.stop_all()
    assert not problems, "\n".join(problems)


@pytest.mark.engine
def test_other_formats_read_calls_and_take_them_back(other_format):
    parser, client, regex = other_format
    answer = ask(client, seed=4, extra_body={"structured_outputs": {"regex": regex}})
    message = answer.choices[0].message
    assert answer.choices[0].finish_reason == "tool_calls", message
    [call] = message.tool_calls
    assert call.function.name == "get_weather" and json.loads(call.function.arguments)["city"] in CITIES
    assert len(call.id) == 9 if parser == "mistral" else call.id.startswith("call_")
    content, _, calls, finish = streamed_message(
        ask(client, seed=4, stream=True, extra_body={"structured_outputs": {"regex": regex}}))
    assert (content, finish) == ("", ["tool_calls"])
    assert [(c["name"], c["arguments"]) for c in calls] == [(call.function.name, call.function.arguments)]
    history = [*QUESTION, message.model_dump(exclude_none=True),
               {"role": "tool", "tool_call_id": call.id, "content": "-3 C, snow"}]
    again = ask(client, messages=history, seed=5, max_tokens=8, tool_choice="none")
    assert again.choices[0].finish_reason in ("stop", "length")
