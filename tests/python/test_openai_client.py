"""The official `openai` Python client against a live `baton serve`, as a vLLM user would point it:
models, completions and chat completions, streaming and not, logprobs in both formats, usage, and
the error classes the client raises for our status codes. What the answers must equal comes from
Baton's own gRPC client on the same deployment (the same tokens through another front end)."""

from __future__ import annotations

import math
import os
import subprocess

import pytest

openai = pytest.importorskip("openai")

from serving_fixtures import DeploymentFactory  # noqa: E402
from test_chat_completions import CHAT_TEMPLATE, MESSAGES, rendered_ids, with_chat_template  # noqa: E402

import baton  # noqa: E402

API_KEY = "test-key-for-the-openai-client"


@pytest.fixture(scope="module")
def chat_model(tiny_model, tmp_path_factory):
    return with_chat_template(tiny_model, tmp_path_factory.mktemp("oai-model") / "tiny-oai", CHAT_TEMPLATE)


@pytest.fixture(scope="module")
def deployment(baton_binary, chat_model, tmp_path_factory):
    factory = DeploymentFactory(baton_binary, chat_model, tmp_path_factory.mktemp("oai-serve"))
    yield factory.start("oai", http=True, serve_args=("--api-key", API_KEY))
    problems = factory.stop_all()
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def oai(deployment):
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{deployment.http_port}/v1", api_key=API_KEY,
                           timeout=60, max_retries=0)
    yield client
    client.close()


@pytest.fixture(scope="module")
def grpc_client(deployment):
    with baton.Client(deployment.address, timeout=60, api_key=API_KEY) as client:
        yield client


@pytest.fixture(scope="module")
def model_name(oai):
    return oai.models.list().data[0].id


@pytest.mark.engine
def test_models_list_and_retrieve(oai, model_name):
    assert model_name == "tiny-oai"
    assert oai.models.retrieve(model_name).id == model_name
    with pytest.raises(openai.NotFoundError) as error:
        oai.models.retrieve("no-such-model")
    assert "The model `no-such-model` does not exist." in str(error.value)


@pytest.mark.engine
def test_completions_match_the_grpc_api_with_logprobs(oai, grpc_client, model_name):
    expected = grpc_client.complete(prompt="Once upon", max_tokens=8, ignore_eos=True, logprobs=2)
    answer = oai.completions.create(model=model_name, prompt="Once upon", max_tokens=8, temperature=0,
                                    logprobs=2, extra_body={"ignore_eos": True})
    [choice] = answer.choices
    assert choice.text == expected.text and choice.finish_reason == "length"
    assert answer.usage.completion_tokens == 8
    lp = choice.logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 8
    assert lp.token_logprobs == pytest.approx([next(x.logprob for x in top if x.token_id == tok)
                                              for tok, top in zip(expected.token_ids, expected.logprobs)])
    assert all(2 <= len(top) <= 3 for top in lp.top_logprobs)
    assert lp.text_offset[0] == 0 and lp.text_offset == sorted(lp.text_offset)

    streamed = list(oai.completions.create(model=model_name, prompt="Once upon", max_tokens=8,
                                           temperature=0, stream=True, stream_options={"include_usage": True},
                                           extra_body={"ignore_eos": True}))
    assert "".join(c.choices[0].text for c in streamed if c.choices) == expected.text
    assert all(c.usage is None for c in streamed[:-1]) and streamed[-1].usage.completion_tokens == 8

    # logprobs=0: the sampled token's alone, as vLLM answers it.
    zero = oai.completions.create(model=model_name, prompt="Once upon", max_tokens=3, temperature=0,
                                  logprobs=0, extra_body={"ignore_eos": True})
    assert [len(top) for top in zero.choices[0].logprobs.top_logprobs] == [1, 1, 1]


@pytest.mark.engine
def test_chat_completions_with_logprobs(oai, grpc_client, chat_model, model_name):
    ids = rendered_ids(chat_model, MESSAGES)
    expected = grpc_client.complete(token_ids=ids, max_tokens=8, ignore_eos=True, logprobs=3)
    answer = oai.chat.completions.create(model=model_name, messages=MESSAGES, max_tokens=8, temperature=0,
                                         logprobs=True, top_logprobs=3, extra_body={"ignore_eos": True})
    [choice] = answer.choices
    assert choice.message.role == "assistant" and choice.message.content == expected.text
    assert answer.usage.prompt_tokens == len(ids) and answer.usage.completion_tokens == 8
    content = choice.logprobs.content
    assert len(content) == 8
    for entry, top in zip(content, expected.logprobs):
        assert len(entry.top_logprobs) == 3
        # Greedy: the sampled token is the most likely one.
        assert entry.top_logprobs[0].token == entry.token
        # The chat request may take the gRPC one's prompt from the prefix cache: its logits then come
        # from KV computed in another batch shape, equal up to rounding (1e-5 of the row maximum).
        assert entry.logprob == pytest.approx(top[0].logprob, abs=1e-5)
        assert entry.logprob == pytest.approx(entry.top_logprobs[0].logprob)
        assert bytes(entry.bytes).decode("utf-8", "replace") == entry.token

    # Sampled at temperature 1: the sampled token's own logprob, wherever it ranks.
    seeded = dict(model=model_name, messages=MESSAGES, max_tokens=6, temperature=1.0, seed=3,
                  extra_body={"ignore_eos": True})
    sampled = oai.chat.completions.create(**seeded, logprobs=True, top_logprobs=1)
    reference = grpc_client.complete(token_ids=ids, max_tokens=6, temperature=1.0, seed=3, ignore_eos=True,
                                     logprobs=1)
    assert sampled.choices[0].message.content == reference.text
    for entry, top, token in zip(sampled.choices[0].logprobs.content, reference.logprobs, reference.token_ids):
        assert entry.logprob == pytest.approx(next(x.logprob for x in top if x.token_id == token))
        assert entry.logprob <= entry.top_logprobs[0].logprob + 1e-6 and math.isfinite(entry.logprob)

    plain = oai.chat.completions.create(**seeded)
    assert plain.choices[0].logprobs is None and plain.choices[0].message.content == reference.text


@pytest.mark.engine
def test_chat_streaming(oai, model_name):
    whole = oai.chat.completions.create(model=model_name, messages=MESSAGES, max_tokens=10, temperature=0,
                                        extra_body={"ignore_eos": True})
    chunks = list(oai.chat.completions.create(model=model_name, messages=MESSAGES, max_tokens=10,
                                              temperature=0, stream=True, logprobs=True,
                                              stream_options={"include_usage": True},
                                              extra_body={"ignore_eos": True}))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert deltas[0].role == "assistant"
    assert "".join(d.content or "" for d in deltas) == whole.choices[0].message.content
    assert sum(len(c.choices[0].logprobs.content) for c in chunks if c.choices) == 10
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert all(c.usage is None for c in chunks[:-1]) and chunks[-1].usage.completion_tokens == 10


@pytest.mark.engine
def test_error_classes(oai, deployment, model_name):
    with pytest.raises(openai.BadRequestError) as error:
        oai.completions.create(model=model_name, prompt="x", temperature=-1)
    assert "temperature" in str(error.value)
    with pytest.raises(openai.BadRequestError) as error:
        oai.chat.completions.create(model=model_name, messages=MESSAGES, top_logprobs=2)
    assert "'top_logprobs' needs 'logprobs': true" in str(error.value)
    with pytest.raises(openai.NotFoundError):
        oai.chat.completions.create(model="gpt-4", messages=MESSAGES)
    wrong_key = openai.OpenAI(base_url=f"http://127.0.0.1:{deployment.http_port}/v1", api_key="wrong",
                              max_retries=0, timeout=30)
    with pytest.raises(openai.AuthenticationError):
        wrong_key.models.list()
    wrong_key.close()


@pytest.mark.engine
def test_chat_template_file_replaces_the_models(baton_binary, tiny_model, tmp_path):
    """`chat_template: FILE` in the config (what `baton serve --chat-template FILE` writes) gives a
    model without a template one, which sees the model's bos_token all the same."""
    model = with_chat_template(tiny_model, tmp_path / "tiny-plain", None)
    template = tmp_path / "chat.jinja"
    template.write_text("{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
                        "{% if add_generation_prompt %}[assistant] {% endif %}")
    factory = DeploymentFactory(baton_binary, model, tmp_path)
    deployment = factory.start("template-file", http=True, config={"chat_template": str(template)})
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{deployment.http_port}/v1", api_key="none",
                               max_retries=0, timeout=60)
        answer = client.chat.completions.create(model="tiny-plain", messages=MESSAGES[:2], max_tokens=2,
                                                extra_body={"ignore_eos": True})
        client.close()
    finally:
        problems = factory.stop_all()
    assert not problems, problems
    with_file = with_chat_template(tiny_model, tmp_path / "tiny-file", template.read_text())
    assert answer.usage.prompt_tokens == len(rendered_ids(with_file, MESSAGES[:2]))


def test_serve_refuses_a_missing_chat_template(baton_binary, tmp_path):
    run = subprocess.run([str(baton_binary), "serve", "--chat-template", str(tmp_path / "none.jinja"),
                          "--port", "0"], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert f"chat_template: {tmp_path / 'none.jinja'} is not a file" in run.stderr


@pytest.mark.engine
def test_several_choices_prompt_lists_best_of_and_echo(oai, grpc_client, model_name):
    common = dict(model=model_name, max_tokens=6, extra_body={"ignore_eos": True})
    # n: choice i is the request seeded seed + i, so the choices differ and the answer repeats.
    answer = oai.completions.create(prompt="Once upon", temperature=1.0, n=3, seed=5, **common)
    assert [c.index for c in answer.choices] == [0, 1, 2]
    expected = [grpc_client.complete(prompt="Once upon", max_tokens=6, temperature=1.0, seed=5 + i,
                                     ignore_eos=True) for i in range(3)]
    assert [c.text for c in answer.choices] == [e.text for e in expected]
    assert len({c.text for c in answer.choices}) > 1
    assert answer.usage.completion_tokens == 18
    assert answer.usage.prompt_tokens == expected[0].num_prompt_tokens  # the prompt counts once

    # A list of prompts, n each: prompt-major choice indices.
    prompts = ["Once upon", [5, 6, 7]]
    listed = oai.completions.create(prompt=prompts, temperature=0, n=2, **common)
    greedy = [grpc_client.complete(prompt="Once upon", max_tokens=6, ignore_eos=True).text,
              grpc_client.complete(token_ids=[5, 6, 7], max_tokens=6, ignore_eos=True).text]
    assert [c.index for c in listed.choices] == [0, 1, 2, 3]
    assert [c.text for c in listed.choices] == [greedy[0], greedy[0], greedy[1], greedy[1]]

    # Streamed, the choices interleave; each event names its index.
    chunks = list(oai.completions.create(prompt=prompts, temperature=0, n=2, stream=True, **common))
    joined = {}
    for chunk in chunks:
        for choice in chunk.choices:
            joined[choice.index] = joined.get(choice.index, "") + choice.text
    assert joined == {0: greedy[0], 1: greedy[0], 2: greedy[1], 3: greedy[1]}

    # best_of: the candidate (seed + i) with the highest cumulative logprob of its sampled tokens.
    best = oai.completions.create(prompt="Once upon", temperature=1.0, best_of=3, seed=11, **common)
    candidates = [grpc_client.complete(prompt="Once upon", max_tokens=6, temperature=1.0, seed=11 + i,
                                       ignore_eos=True, logprobs=0) for i in range(3)]
    scores = [sum(top[-1].logprob for top in c.logprobs) for c in candidates]
    assert best.choices[0].text == candidates[scores.index(max(scores))].text
    assert best.choices[0].logprobs is None  # ranked by logprobs the client did not ask for

    # echo: the prompt starts each choice.
    echoed = oai.completions.create(prompt="Once upon", temperature=0, echo=True, **common)
    assert echoed.choices[0].text == "Once upon" + greedy[0]
    # echo, logprobs and max_tokens 0: how lm-evaluation-harness scores a text through this client.
    scored = oai.completions.create(model=model_name, prompt="Once upon", echo=True, logprobs=1,
                                    max_tokens=0)
    lp = scored.choices[0].logprobs
    prompt_ids = grpc_client.complete(prompt="Once upon", max_tokens=1).prompt_token_ids
    assert scored.choices[0].text == "Once upon" and len(lp.tokens) == len(prompt_ids)
    assert lp.token_logprobs[0] is None and all(v <= 0 for v in lp.token_logprobs[1:])
    by_grpc = grpc_client.complete(token_ids=prompt_ids, max_tokens=1, prompt_logprobs=1).prompt_logprobs
    assert lp.token_logprobs[1:] == pytest.approx(
        [next(e.logprob for e in entries if e.token_id == t) for t, entries in
         zip(prompt_ids[1:], by_grpc[1:])], abs=1e-6)

    chat = oai.chat.completions.create(messages=MESSAGES, temperature=1.0, seed=2, n=2, **common)
    assert [c.index for c in chat.choices] == [0, 1] and chat.usage.completion_tokens == 12


@pytest.mark.engine
def test_generation_config_sets_the_defaults_on_every_front_end(baton_binary, tiny_model, tmp_path):
    """A sampling field the client leaves out takes the model's generation_config.json value, over
    HTTP and gRPC alike (vLLM's rule); without one, temperature is 1 (OpenAI's default)."""
    model = with_chat_template(tiny_model, tmp_path / "tiny-greedy", CHAT_TEMPLATE)
    (model / "generation_config.json").unlink()
    (model / "generation_config.json").write_text('{"bos_token_id": 0, "eos_token_id": 1, "temperature": 0.0}')
    factory = DeploymentFactory(baton_binary, model, tmp_path)
    deployment = factory.start("greedy-default", http=True)
    try:
        oai = openai.OpenAI(base_url=f"http://127.0.0.1:{deployment.http_port}/v1", api_key="none",
                            max_retries=0, timeout=60)
        common = dict(model="tiny-greedy", prompt="Once upon", max_tokens=8, extra_body={"ignore_eos": True})
        greedy = oai.completions.create(temperature=0, **common).choices[0].text
        # Unseeded, at the model's default temperature 0: the greedy answer every time.
        assert [oai.completions.create(**common).choices[0].text for _ in range(2)] == [greedy, greedy]
        chat = oai.chat.completions.create(model="tiny-greedy", messages=MESSAGES, max_tokens=8,
                                           extra_body={"ignore_eos": True})
        chat_greedy = oai.chat.completions.create(model="tiny-greedy", messages=MESSAGES, max_tokens=8,
                                                  temperature=0, extra_body={"ignore_eos": True})
        assert chat.choices[0].message.content == chat_greedy.choices[0].message.content
        oai.close()
        with deployment.client() as client:
            # temperature=None leaves the field unset: the server's default, as HTTP.
            assert client.complete(prompt="Once upon", max_tokens=8, ignore_eos=True, temperature=None).text == greedy
            # An explicit temperature still wins.
            sampled = {client.complete(prompt="Once upon", max_tokens=8, ignore_eos=True, temperature=1.0,
                                       seed=s).text for s in range(4)}
            assert len(sampled) > 1
    finally:
        problems = factory.stop_all()
    assert not problems, problems


@pytest.mark.engine
def test_include_stop_str_in_output(oai, model_name):
    common = dict(model=model_name, prompt="Once upon", max_tokens=12, temperature=0,
                  extra_body={"ignore_eos": True})
    whole = oai.completions.create(**common).choices[0].text
    stop = whole[3:5]
    assert stop and whole.find(stop) == 3
    cut = oai.completions.create(stop=[stop], **common).choices[0]
    kept = oai.completions.create(stop=[stop], **{**common, "extra_body": {"ignore_eos": True,
                                                                          "include_stop_str_in_output": True}})
    assert cut.text == whole[:3] and cut.finish_reason == "stop"
    assert kept.choices[0].text == whole[:5] and kept.choices[0].finish_reason == "stop"
    with pytest.raises(openai.BadRequestError) as error:
        oai.completions.create(suffix="end", **common)
    assert "'suffix' is not supported" in str(error.value)


@pytest.mark.engine
def test_generate_through_a_keyed_server(run_baton, deployment):
    args = ("generate", "--server", deployment.address, "--prompt", "Hello", "--max-tokens", "3", "--json")
    refused = run_baton(*args, check=False, env={**os.environ, "BATON_API_KEY": ""})
    assert refused.returncode != 0 and "missing or wrong API key" in refused.stderr, refused.stderr
    answered = run_baton(*args, "--api-key", API_KEY)
    assert '"finish_reason"' in answered.stdout
    from_env = run_baton(*args, env={**os.environ, "BATON_API_KEY": API_KEY})
    assert '"finish_reason"' in from_env.stdout
