"""/v1/chat/completions on a live `baton serve`: the messages go through the checkpoint's own chat
template (tokenizer_config.json `chat_template`) exactly as transformers renders it (jinja2, set up
as test_chat_template_parity.py sets it up), are tokenized without adding special tokens, and the
answer is what /v1/completions-style generation of those very tokens gives; streamed deltas add up
to the same message. A model without a template, a template that raises, and bad messages are 400s
with a JSON error."""

from __future__ import annotations

import json
import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest

pytest.importorskip("jinja2")
import tokenizers  # noqa: E402

import baton  # noqa: E402

from serving_fixtures import DeploymentFactory  # noqa: E402
from test_chat_template_parity import _environment  # noqa: E402

# A Llama-3-style template of our own; raise_exception guards the roles it knows.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('unknown role: ' ~ message['role']) }}{% endif %}"
    "<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{{ message['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")

MESSAGES = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Name a colour."},
            {"role": "assistant", "content": "Blue."},
            {"role": "user", "content": "Another one, please."}]


def with_chat_template(tiny_model: Path, out: Path, template: str | None) -> Path:
    """The tiny checkpoint (linked) with `template` as its chat template (None: none at all)."""
    out.mkdir()
    for item in tiny_model.iterdir():
        if item.name != "tokenizer_config.json":
            os.symlink(item, out / item.name)
    config = json.loads((tiny_model / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    if template is not None:
        config["chat_template"] = template
    (out / "tokenizer_config.json").write_text(json.dumps(config))
    return out


@pytest.fixture(scope="module")
def chat_model(tiny_model, tmp_path_factory) -> Path:
    return with_chat_template(tiny_model, tmp_path_factory.mktemp("chat-model") / "tiny-chat", CHAT_TEMPLATE)


@pytest.fixture(scope="module")
def chat_deployment(baton_binary, chat_model, tmp_path_factory):
    factory = DeploymentFactory(baton_binary, chat_model, tmp_path_factory.mktemp("chat-serve"))
    yield factory.start("chat", http=True)
    problems = factory.stop_all()
    assert not problems, "\n".join(problems)


def post(port: int, path: str, body: dict) -> tuple[int, dict | str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read().decode()
    return status, (text if text.startswith("data:") else json.loads(text))


def rendered_ids(chat_model: Path, messages: list[dict]) -> list[int]:
    config = json.loads((chat_model / "tokenizer_config.json").read_text())
    text = _environment().from_string(config["chat_template"]).render(
        messages=messages, add_generation_prompt=True, bos_token=config["bos_token"],
        eos_token=config["eos_token"], tools=None, documents=None)
    tokenizer = tokenizers.Tokenizer.from_file(str(chat_model / "tokenizer.json"))
    return tokenizer.encode(text, add_special_tokens=False).ids


@pytest.mark.engine
def test_chat_answers_what_the_rendered_prompt_generates(chat_deployment, chat_model):
    ids = rendered_ids(chat_model, MESSAGES)
    assert ids.count(0) == 1 and ids[0] == 0, "BOS once, from the template's bos_token"
    request = {"messages": MESSAGES, "max_tokens": 12, "temperature": 0, "ignore_eos": True}
    status, body = post(chat_deployment.http_port, "/v1/chat/completions", request)
    assert status == 200, body
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    [choice] = body["choices"]
    assert choice["message"]["role"] == "assistant" and choice["finish_reason"] == "length"
    assert body["usage"]["prompt_tokens"] == len(ids) and body["usage"]["completion_tokens"] == 12
    with chat_deployment.client() as client:
        expected = client.complete(token_ids=ids, max_tokens=12, ignore_eos=True)
    assert choice["message"]["content"] == expected.text

    status, text = post(chat_deployment.http_port, "/v1/chat/completions",
                        {**request, "stream": True, "stream_options": {"include_usage": True}})
    assert status == 200
    events = [json.loads(line[len("data: "):]) for line in text.splitlines()
              if line.startswith("data: ") and line != "data: [DONE]"]
    assert text.rstrip().endswith("data: [DONE]")
    deltas = [e["choices"][0]["delta"] for e in events if e["choices"]]
    assert deltas[0]["role"] == "assistant"
    assert "".join(d["content"] for d in deltas) == expected.text
    assert all(e["object"] == "chat.completion.chunk" for e in events)
    assert events[-1]["usage"]["completion_tokens"] == 12


@pytest.mark.engine
def test_chat_errors_are_400_with_the_reason(chat_deployment):
    port = chat_deployment.http_port
    for body, says in [
        ({}, "'messages' is required"),
        ({"messages": []}, "'messages' must be a non-empty array"),
        ({"messages": [{"content": "no role"}]}, "'messages'[0] must be an object with a string 'role'"),
        ({"messages": [{"role": "user", "content": 5}]}, "'messages'[0].content must be"),
        ({"messages": [{"role": "robot", "content": "hi"}]}, "chat template: unknown role: robot"),
        ({"messages": MESSAGES, "n": 0}, "'n' must be in [1, 128]"),
        ({"messages": MESSAGES, "n": 2, "best_of": 3}, "'best_of' is not supported on chat completions"),
        ({"messages": MESSAGES, "presence_penalty": 2.5}, "sampling.presence_penalty 2.5 must be in [-2, 2]"),
        ({"messages": MESSAGES, "logit_bias": {"x": 10}}, "'logit_bias': key 'x' is not a token id"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
         "'messages'[0].content[0]: type 'image_url' is not supported: the served model takes text parts only"),
        ({"messages": MESSAGES, "continue_final_message": True},
         "'continue_final_message' and 'add_generation_prompt' cannot both be true"),
        ({"messages": MESSAGES, "chat_template": "{% for m in messages %}"}, "'chat_template': "),
        ({"messages": MESSAGES, "echo": True}, "'echo' is not supported on chat completions"),
        ({"messages": MESSAGES, "stream_options": {"include_usage": True}}, "'stream_options' needs 'stream': true"),
        ({"messages": MESSAGES, "detokenize": False}, "'detokenize' is not supported yet"),
    ]:
        status, answer = post(port, "/v1/chat/completions", body)
        assert status == 400, (body, answer)
        assert says in answer["error"]["message"], (body, answer)


@pytest.mark.engine
def test_a_model_without_a_chat_template_says_so(baton_binary, tiny_model, tmp_path):
    model = with_chat_template(tiny_model, tmp_path / "tiny-plain", None)
    factory = DeploymentFactory(baton_binary, model, tmp_path)
    deployment = factory.start("no-template", http=True)
    try:
        status, answer = post(deployment.http_port, "/v1/chat/completions", {"messages": MESSAGES})
    finally:
        problems = factory.stop_all()
    assert not problems, problems
    assert status == 400
    assert "has no chat template" in answer["error"]["message"], answer


@pytest.mark.engine
def test_the_generated_models_chat(fresh_deployments):
    """make_checkpoint.py writes a chat template, so the generated test models chat."""
    deployment = fresh_deployments.start("default-chat", http=True)
    status, answer = post(deployment.http_port, "/v1/chat/completions",
                          {"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
                           "max_tokens": 4, "ignore_eos": True})
    assert status == 200, answer
    assert answer["usage"]["completion_tokens"] == 4 and answer["choices"][0]["message"]["role"] == "assistant"


@pytest.mark.engine
def test_grpc_chat_renders_as_http_chat(chat_deployment, chat_model):
    """baton.v1's ChatPrompt (Client.chat) goes through the same template to the same tokens."""
    ids = rendered_ids(chat_model, MESSAGES)
    status, body = post(chat_deployment.http_port, "/v1/chat/completions",
                        {"messages": MESSAGES, "max_tokens": 6, "temperature": 0, "ignore_eos": True})
    assert status == 200, body
    with chat_deployment.client() as client:
        answer = client.chat(MESSAGES, max_tokens=6, ignore_eos=True)
        assert list(answer.prompt_token_ids) == ids
        assert answer.text == body["choices"][0]["message"]["content"]
        # Without the generation prompt the rendering stops after the last message.
        bare = client.chat(MESSAGES, max_tokens=1, ignore_eos=True, add_generation_prompt=False)
        assert len(bare.prompt_token_ids) < len(ids)
        with pytest.raises(baton.BatonError) as error:
            client.chat([{"role": "robot", "content": "hi"}], max_tokens=1)
        assert error.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert "chat template: unknown role: robot" in error.value.details
        with pytest.raises(baton.BatonError) as error:
            client.chat([], max_tokens=1)
        assert "'messages' must be a non-empty array" in error.value.details
        with pytest.raises(ValueError):
            client.generate(prompt="x", messages=MESSAGES)


@pytest.mark.engine
@pytest.mark.engine
def test_continue_final_message_and_a_requests_own_template(chat_deployment, chat_model):
    port = chat_deployment.http_port
    tokenizer = tokenizers.Tokenizer.from_file(str(chat_model / "tokenizer.json"))
    # The prompt ends inside the final (assistant) message, as transformers' continue_final_message.
    partial = [*MESSAGES, {"role": "assistant", "content": "Green, and"}]
    status, body = post(port, "/tokenize", {"messages": partial, "add_generation_prompt": False,
                                            "continue_final_message": True})
    assert status == 200, body
    text = tokenizer.decode(body["tokens"], skip_special_tokens=False)
    assert text.endswith("<|start_header_id|>assistant<|end_header_id|>\n\nGreen, and"), text
    status, body = post(port, "/v1/chat/completions", {"messages": partial, "add_generation_prompt": False,
                                                       "continue_final_message": True, "max_tokens": 3})
    assert status == 200 and body["usage"]["prompt_tokens"] == len(tokenizer.encode(text, add_special_tokens=False).ids)
    # A request's own template, with the model's bos_token.
    own = "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
    status, body = post(port, "/tokenize", {"messages": MESSAGES[:2], "chat_template": own})
    assert status == 200, body
    assert tokenizer.decode(body["tokens"], skip_special_tokens=False).endswith(
        "[system] You are terse.\n[user] Name a colour.\n")
    assert body["tokens"][0] == 0  # the model's BOS, from bos_token
    # vLLM's request_id field names the answer (an X-Request-Id header would win).
    status, body = post(port, "/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 2, "request_id": "my-7"})
    assert status == 200 and body["id"] == "chatcmpl-my-7", body


def test_tokenize_and_detokenize_show_what_the_model_receives(chat_deployment, chat_model):
    """vLLM's /tokenize (a prompt, or messages through the chat template) and /detokenize."""
    port = chat_deployment.http_port
    tokenizer = tokenizers.Tokenizer.from_file(str(chat_model / "tokenizer.json"))
    status, body = post(port, "/tokenize", {"prompt": "Hello there", "return_token_strs": True})
    assert status == 200, body
    expected = tokenizer.encode("Hello there")  # special tokens added, as /v1/completions does
    assert body["tokens"] == expected.ids and body["count"] == len(expected.ids)
    assert body["token_strs"] == expected.tokens and body["max_model_len"] > 0
    status, body = post(port, "/tokenize", {"prompt": "Hello there", "add_special_tokens": False})
    assert body["tokens"] == tokenizer.encode("Hello there", add_special_tokens=False).ids
    assert body["token_strs"] is None

    status, body = post(port, "/tokenize", {"messages": MESSAGES})
    assert status == 200, body
    assert body["tokens"] == rendered_ids(chat_model, MESSAGES)

    status, body = post(port, "/detokenize", {"tokens": rendered_ids(chat_model, MESSAGES)})
    assert status == 200, body
    assert body["prompt"] == tokenizer.decode(rendered_ids(chat_model, MESSAGES), skip_special_tokens=False)

    for path, request, says in [
        ("/tokenize", {}, "give exactly one of 'prompt' and 'messages'"),
        ("/tokenize", {"prompt": "x", "messages": MESSAGES}, "give exactly one"),
        ("/tokenize", {"prompt": 5}, "'prompt' must be a string"),
        ("/tokenize", {"messages": [{"role": "robot", "content": "x"}]}, "unknown role: robot"),
        ("/detokenize", {"tokens": "x"}, "'tokens' must be an array of token ids"),
        ("/detokenize", {"tokens": [1, 10**6]}, "is not a token id of the vocabulary"),
    ]:
        status, body = post(port, path, request)
        assert status == 400 and says in body["error"]["message"], (path, request, body)
    status, body = post(port, "/tokenize", {"prompt": "x", "model": "other"})
    assert status == 404 and body["error"]["message"] == "The model `other` does not exist."
