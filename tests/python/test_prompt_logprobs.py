"""Prompt logprobs end to end: /v1/completions' echo with logprobs (and max_tokens 0, how evaluation
harnesses such as lm-evaluation-harness score a text) and gRPC's sampling.prompt_logprobs, on a
disaggregated deployment (the prefill worker scores the prompt and the scheduler carries the scores to
the first chunk) and a colocated one (chunked prefill: the scores of each chunk join up). Every score
is checked against the float64 NumPy reference (reference_llama.py): prompt token i's logprob is
log_softmax(logits of the prefix before it)[token i]."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import numpy as np
import pytest

from reference_llama import ReferenceLlama
from serving_fixtures import DeploymentFactory

import baton

pytestmark = pytest.mark.engine

PROMPT_LEN = 40
TOLERANCE = 2e-3  # float32 engine against the float64 reference, on logprobs of a few units


@pytest.fixture(scope="module")
def deployments(baton_binary, tiny_model, tmp_path_factory):
    factory = DeploymentFactory(baton_binary, tiny_model, tmp_path_factory.mktemp("prompt-logprobs"))
    started = {
        "disaggregated": factory.start("pl-disagg", http=True),
        # Chunks of 16 tokens: a 40-token prompt is scored over three steps.
        "colocated": factory.start("pl-coloc", mode="colocated", http=True,
                                   colocated={"chunked_prefill": True, "max_num_batched_tokens": 16}),
    }
    yield started
    problems = factory.stop_all()
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def reference(tiny_model):
    return ReferenceLlama.from_dir(tiny_model)


def prompt_ids(seed: int) -> list[int]:
    return [int(t) for t in np.random.default_rng(seed).integers(3, 256, PROMPT_LEN)]


def expected_logprobs(reference: ReferenceLlama, ids: list[int]) -> np.ndarray:
    """[len(ids), vocab]: row i - 1 holds the log-probabilities of token i."""
    logits = reference.logits(ids).astype(np.float64)
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def post(port: int, path: str, body: dict) -> dict:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def stream_events(port: int, body: dict) -> list[dict]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                     data=json.dumps({**body, "stream": True}).encode(),
                                     headers={"Content-Type": "application/json"})
    events = []
    with urllib.request.urlopen(request, timeout=60) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line[len("data: "):]))
    return events


@pytest.mark.parametrize("mode", ["disaggregated", "colocated"])
def test_echo_with_logprobs_scores_every_prompt_token_as_the_reference(deployments, reference, mode):
    deployment = deployments[mode]
    ids = prompt_ids(1)
    expected = expected_logprobs(reference, ids)
    body = {"prompt": ids, "echo": True, "logprobs": 2, "max_tokens": 3, "temperature": 0}
    answer = post(deployment.http_port, "/v1/completions", body)
    logprobs = answer["choices"][0]["logprobs"]
    assert len(logprobs["tokens"]) == PROMPT_LEN + 3
    assert logprobs["token_logprobs"][0] is None and logprobs["top_logprobs"][0] is None
    for i in range(1, PROMPT_LEN):
        want = expected[i - 1]
        assert logprobs["token_logprobs"][i] == pytest.approx(want[ids[i]], abs=TOLERANCE), i
        top = logprobs["top_logprobs"][i]
        # The two most likely, then the prompt token when it is not among them (texts may collide).
        assert 1 <= len(top) <= 3
        assert max(top.values()) == pytest.approx(want.max(), abs=TOLERANCE), i
    # The generated tokens follow, scored as before.
    assert all(isinstance(v, float) for v in logprobs["token_logprobs"][PROMPT_LEN:])
    offsets = logprobs["text_offset"]
    assert offsets[0] == 0 and offsets == sorted(offsets)

    # Streamed: the first event carries the prompt with its scores, then the tokens follow.
    events = stream_events(deployment.http_port, body)
    first = events[0]["choices"][0]
    assert first["text"].startswith(answer["choices"][0]["text"][:1])
    assert len(first["logprobs"]["tokens"]) == PROMPT_LEN + 1  # the prompt and the first token
    streamed = [v for e in events if e["choices"] for v in e["choices"][0]["logprobs"]["token_logprobs"]]
    assert len(streamed) == PROMPT_LEN + 3 and streamed[0] is None
    for got, want in zip(streamed[1:], logprobs["token_logprobs"][1:]):
        assert got == pytest.approx(want, abs=1e-5)


@pytest.mark.parametrize("mode", ["disaggregated", "colocated"])
def test_echo_with_max_tokens_zero_answers_the_prompt_alone(deployments, reference, mode):
    deployment = deployments[mode]
    ids = prompt_ids(2)
    expected = expected_logprobs(reference, ids)
    answer = post(deployment.http_port, "/v1/completions",
                  {"prompt": ids, "echo": True, "logprobs": 0, "max_tokens": 0})
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "length"
    logprobs = choice["logprobs"]
    assert len(logprobs["tokens"]) == PROMPT_LEN  # nothing generated shows
    total = sum(logprobs["token_logprobs"][1:])
    want_total = sum(expected[i - 1][ids[i]] for i in range(1, PROMPT_LEN))
    assert total == pytest.approx(want_total, abs=TOLERANCE * PROMPT_LEN)
    # logprobs 0: the prompt token's own entry alone.
    assert all(len(top) == 1 for top in logprobs["top_logprobs"][1:])


@pytest.mark.parametrize("mode", ["disaggregated", "colocated"])
def test_grpc_prompt_logprobs_on_the_first_chunk(deployments, reference, mode):
    ids = prompt_ids(3)
    expected = expected_logprobs(reference, ids)
    with baton.Client(deployments[mode].address, timeout=60) as client:
        with client.generate(token_ids=ids, max_tokens=4, prompt_logprobs=3) as stream:
            chunks = list(stream)
        plain = client.complete(token_ids=ids, max_tokens=4)
    assert len(chunks[0].prompt_logprobs) == PROMPT_LEN
    assert all(not c.prompt_logprobs for c in chunks[1:])
    assert chunks[0].prompt_logprobs[0] == ()
    for i in range(1, PROMPT_LEN):
        entries = chunks[0].prompt_logprobs[i]
        by_id = {lp.token_id: lp.logprob for lp in entries}
        assert by_id[ids[i]] == pytest.approx(expected[i - 1][ids[i]], abs=TOLERANCE), i
        top3 = np.argsort(-expected[i - 1])[:3]
        assert [lp.token_id for lp in entries[:3]] == [int(t) for t in top3], i
    assert plain.prompt_logprobs == ()
    # Scoring the prompt changes nothing of the generation.
    assert sum((c.token_ids for c in chunks), ()) == plain.token_ids


def test_prompt_logprobs_out_of_range_is_invalid_argument(deployments):
    with baton.Client(deployments["disaggregated"].address, timeout=60) as client:
        with pytest.raises(baton.BatonError) as error:
            client.complete(token_ids=[5, 6, 7], max_tokens=2, prompt_logprobs=21)
    assert error.value.code.name == "INVALID_ARGUMENT" and "prompt_logprobs 21" in str(error.value)


def test_vllm_prompt_logprobs_field_with_ranks(deployments, reference):
    """vLLM's extra "prompt_logprobs": per completion choice, and once beside the chat choices; each
    entry maps token ids to {"logprob", "rank", "decoded_token"}, the rank counting the tokens the
    model found more likely."""
    port = deployments["disaggregated"].http_port
    ids = prompt_ids(4)
    expected = expected_logprobs(reference, ids)
    answer = post(port, "/v1/completions", {"prompt": ids, "prompt_logprobs": 1, "max_tokens": 2})
    scores = answer["choices"][0]["prompt_logprobs"]
    assert len(scores) == PROMPT_LEN and scores[0] is None
    for i in range(1, PROMPT_LEN):
        own = scores[i][str(ids[i])]
        assert own["logprob"] == pytest.approx(expected[i - 1][ids[i]], abs=TOLERANCE), i
        # The reference's count of tokens above, give or take those within float32's reach of it.
        row, mine = expected[i - 1], expected[i - 1][ids[i]]
        assert 1 + (row > mine + TOLERANCE).sum() <= own["rank"] <= 1 + (row > mine - TOLERANCE).sum(), i
        best = max(scores[i].values(), key=lambda e: e["logprob"])
        assert best["rank"] == 1
        assert isinstance(own["decoded_token"], str)

    chat = post(port, "/v1/chat/completions",
                {"messages": [{"role": "user", "content": "Hello"}], "prompt_logprobs": 0,
                 "max_tokens": 2})
    assert chat["prompt_logprobs"][0] is None and len(chat["prompt_logprobs"]) > 1
    assert all(len(entry) == 1 for entry in chat["prompt_logprobs"][1:])
    assert "prompt_logprobs" not in chat["choices"][0]


@pytest.mark.parametrize("body, field", [
    ({"prompt_logprobs": 1, "stream": True}, "prompt_logprobs"),
    ({"tool_choice": "auto"}, "tool_choice"),
    ({"response_format": {"type": "structural_tag"}}, "response_format"),
    ({"use_beam_search": True}, "use_beam_search"),
])
def test_chat_fields_it_does_not_honour_are_refused_by_name(deployments, body, field):
    port = deployments["disaggregated"].http_port
    with pytest.raises(urllib.error.HTTPError) as error:
        post(port, "/v1/chat/completions",
             {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 2, **body})
    assert error.value.code == 400
    assert f"'{field}'" in json.loads(error.value.read())["error"]["message"]
