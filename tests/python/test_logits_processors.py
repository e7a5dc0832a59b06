"""The logits processors end to end on a live `baton serve` (1 prefill + 1 decode worker, so the
first token is sampled on the prefill worker and the rest on the decode worker after the hand-off):
logit_bias, presence/frequency/repetition penalties, min_p and min_tokens.

  * NumPy reference: greedy generation with penalties and biases is, token for token, the argmax of
    the float64 reference model's logits (reference_llama.py) processed in NumPy as vLLM processes
    them (bias, then the repetition penalty over prompt + output, then frequency and presence over
    the output). The reference is fed the served tokens, so the two agree iff every argmax does; a
    row whose top two processed logits are within float32 rounding is a tie, reported, not failed.
  * HTTP (/v1/completions and /v1/chat/completions): each field changes the answer as it should;
    values out of range are 400s whose message names the field.
  * gRPC: the same fields through baton.Client; out-of-range values are INVALID_ARGUMENT naming
    the field.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

from pathlib import Path

import grpc
import numpy as np
import pytest

import baton
from reference_llama import ReferenceLlama
from serving_fixtures import DeploymentFactory

pytestmark = pytest.mark.engine

PROMPT = [int(t) for t in np.random.default_rng(7).integers(2, 32000, 12)]
NUM_TOKENS = 24
TIE_FRACTION_OF_RANGE = 1e-4  # float32 engine vs float64 reference (test_reference_parity.py: 1e-4)


@pytest.fixture(scope="module")
def deployment(baton_binary, tiny_model, tmp_path_factory):
    factory = DeploymentFactory(baton_binary, tiny_model, tmp_path_factory.mktemp("logits-processors"))
    yield factory.start("logits-processors", http=True)
    problems = factory.stop_all()
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def reference(tiny_model) -> ReferenceLlama:
    return ReferenceLlama.from_dir(tiny_model)


def post(port: int, path: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def process(row: np.ndarray, prompt: list[int], output: list[int], *, logit_bias=None,
            presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0) -> np.ndarray:
    """vLLM's processors on one row of raw logits (sampler.py / penalties.py), in NumPy."""
    x = row.copy()
    for token, bias in (logit_bias or {}).items():
        x[token] += bias
    seen = np.zeros(x.size, dtype=bool)
    seen[prompt] = True
    seen[output] = True
    counts = np.bincount(np.asarray(output, dtype=np.int64), minlength=x.size)
    if repetition_penalty != 1.0:
        x = np.where(seen, np.where(x > 0, x / repetition_penalty, x * repetition_penalty), x)
    x = x - frequency_penalty * counts - presence_penalty * (counts > 0)
    return x


def check_argmax(x: np.ndarray, token: int, where: str) -> list[str]:
    """[] when `token` is the argmax of the processed reference row x; [where] when it is not but
    within float32 rounding of it (a tie); fails otherwise."""
    best = int(np.argmax(x))
    if best == token:
        return []
    finite = x[np.isfinite(x)]
    gap = x[best] - x[token]
    assert gap <= TIE_FRACTION_OF_RANGE * (finite.max() - finite.min()), (
        f"{where}: served {token}, the reference picks {best} (gap {gap:.3g})")
    return [where]


def lifter(reference: ReferenceLlama):
    """lift(token, margin): the bias (a float32 value, as the wire carries it) that puts `token`
    `margin` above the largest raw logit of the first generated position, so that the processors
    have repeats to act on (this random-weight model repeats nothing by itself)."""
    row = reference.logits(PROMPT)[-1]

    def lift(token: int, margin: float) -> float:
        return float(np.float32(row.max() - row[token] + margin))

    return lift


# Each case: the processors, and the bias alone (without which the penalties would see no repeats).
CASES = {
    # A prompt token biased to the top: the repetition penalty (prompt tokens count) divides it away.
    "repetition": lambda lift: (dict(repetition_penalty=1.8), {PROMPT[0]: lift(PROMPT[0], 2.0)}),
    # A token biased to the top: each time it is generated it loses a little more.
    "frequency_presence": lambda lift: (dict(frequency_penalty=0.7, presence_penalty=0.5),
                                        {17: lift(17, 2.0)}),
    "all": lambda lift: (dict(repetition_penalty=1.3, frequency_penalty=0.4, presence_penalty=-0.3),
                         {17: lift(17, 1.0), PROMPT[0]: lift(PROMPT[0], 2.0), 300: -5.0}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_greedy_tokens_are_the_numpy_references(deployment, reference, name):
    penalties, bias = CASES[name](lifter(reference))
    options = dict(penalties, logit_bias=bias)
    with deployment.client() as client:
        served = list(client.complete(token_ids=PROMPT, max_tokens=NUM_TOKENS, ignore_eos=True,
                                      **options).token_ids)
        biased = list(client.complete(token_ids=PROMPT, max_tokens=NUM_TOKENS, ignore_eos=True,
                                      logit_bias=bias).token_ids)
    assert len(served) == NUM_TOKENS
    assert served != biased, f"{name}: the penalties changed nothing; pick stronger values"
    rows = reference.logits(PROMPT + served)[len(PROMPT) - 1:-1]  # row i chose served[i]
    ties = []
    for i, token in enumerate(served):
        ties += check_argmax(process(rows[i], PROMPT, served[:i], **options), token,
                             f"{name}: token {i}")
    assert len(ties) <= 2, f"{name}: ties at {ties}"
    # The bias alone is the reference's too.
    rows = reference.logits(PROMPT + biased)[len(PROMPT) - 1:-1]
    for i, token in enumerate(biased):
        ties += check_argmax(process(rows[i], PROMPT, biased[:i], logit_bias=bias), token,
                             f"{name} (bias alone): token {i}")
    assert len(ties) <= 2, f"{name}: ties at {ties}"


def test_min_tokens_and_min_p_against_numpy(deployment, reference):
    """min_tokens masks EOS and the stop ids until reached (the reference row with those at -inf);
    min_p 1 keeps only the most likely token: sampling at any temperature is then greedy."""
    with deployment.client() as client:
        plain = list(client.complete(token_ids=PROMPT, max_tokens=8, ignore_eos=True).token_ids)
        stops = [plain[0], plain[1]]
        stopped = client.complete(token_ids=PROMPT, max_tokens=8, stop_token_ids=stops)
        assert list(stopped.token_ids) == plain[:1] and stopped.finish_reason == "stop"
        served = client.complete(token_ids=PROMPT, max_tokens=8, stop_token_ids=stops, min_tokens=5)
        sampled = client.complete(token_ids=PROMPT, max_tokens=8, ignore_eos=True, temperature=1.5,
                                  seed=3, min_p=1.0)
    tokens = list(served.token_ids)
    assert len(tokens) >= 5
    rows = reference.logits(PROMPT + tokens)[len(PROMPT) - 1:-1]
    eos = [1]  # the tiny checkpoint's eos_token_id
    ties = []
    for i, token in enumerate(tokens):
        x = rows[i].copy()
        if i < 5:
            x[stops + eos] = -np.inf
        ties += check_argmax(x, token, f"token {i}")
    assert len(ties) <= 1, ties
    assert list(sampled.token_ids) == plain


def test_http_fields_change_the_answer(deployment, reference):
    port = deployment.http_port
    base = {"prompt": PROMPT, "max_tokens": 16, "temperature": 0, "ignore_eos": True}
    status, plain = post(port, "/v1/completions", base)
    assert status == 200, plain
    plain_text = plain["choices"][0]["text"]
    with deployment.client() as client:
        plain_ids = list(client.complete(token_ids=PROMPT, max_tokens=16, ignore_eos=True).token_ids)
    assert plain_text  # the comparisons below need some text
    status, answer = post(port, "/v1/completions", {**base, "logit_bias": {str(plain_ids[0]): -100}})
    assert status == 200 and answer["choices"][0]["text"] != plain_text, answer
    # A token biased to the top repeats; each penalty breaks the repeats.
    repeating = {**base, "logit_bias": {"17": lifter(reference)(17, 0.5)}}
    status, repeated = post(port, "/v1/completions", repeating)
    assert status == 200, repeated
    for field, value in [("presence_penalty", 2.0), ("frequency_penalty", 2.0),
                         ("repetition_penalty", 2.0)]:
        status, answer = post(port, "/v1/completions", {**repeating, field: value})
        assert status == 200, (field, answer)
        assert answer["choices"][0]["text"] != repeated["choices"][0]["text"], field
    # The same field value over gRPC and HTTP gives the same text.
    status, forced = post(port, "/v1/completions", {**base, "logit_bias": {"17": 100}})
    with deployment.client() as client:
        forced_grpc = client.complete(token_ids=PROMPT, max_tokens=16, ignore_eos=True,
                                      logit_bias={17: 100})
    assert list(forced_grpc.token_ids) == [17] * 16
    assert forced["choices"][0]["text"] == forced_grpc.text
    # min_p 1: sampling is greedy.
    status, sampled = post(port, "/v1/completions", {**base, "temperature": 1.5, "seed": 3, "min_p": 1})
    assert status == 200 and sampled["choices"][0]["text"] == plain_text, sampled
    # min_tokens: the first token as a stop id ends at once without it, not before 6 tokens with it.
    body = {**base, "stop_token_ids": [plain_ids[0]], "ignore_eos": False}
    status, stopped = post(port, "/v1/completions", body)
    assert status == 200 and stopped["usage"]["completion_tokens"] == 1, stopped
    status, held = post(port, "/v1/completions", {**body, "min_tokens": 6})
    assert status == 200 and held["usage"]["completion_tokens"] >= 6, held
    # Stop strings wait for min_tokens too: a stop string that is the start of the answer.
    stop = plain_text[:2]
    status, early = post(port, "/v1/completions", {**base, "stop": [stop]})
    assert status == 200 and early["choices"][0]["finish_reason"] == "stop", early
    assert early["usage"]["completion_tokens"] < 6, early
    status, late = post(port, "/v1/completions", {**base, "stop": [stop], "min_tokens": 6})
    assert status == 200 and late["usage"]["completion_tokens"] >= 6, late
    assert late["choices"][0]["text"].startswith(plain_text[:2]), late
    # The chat endpoint reads the same fields.
    messages = [{"role": "user", "content": "Name a colour."}]
    status, chat_plain = post(port, "/v1/chat/completions",
                              {"messages": messages, "max_tokens": 8, "temperature": 0})
    status, chat_biased = post(port, "/v1/chat/completions",
                               {"messages": messages, "max_tokens": 8, "temperature": 0,
                                "logit_bias": {"17": 100}})
    assert status == 200, chat_biased
    assert chat_biased["choices"][0]["message"]["content"] != chat_plain["choices"][0]["message"]["content"]


BAD_VALUES = [
    ("presence_penalty", 2.5, "presence_penalty"),
    ("frequency_penalty", -3, "frequency_penalty"),
    ("repetition_penalty", 0, "repetition_penalty"),
    ("repetition_penalty", -1, "repetition_penalty"),
    ("min_p", 1.5, "min_p"),
    ("min_p", -0.1, "min_p"),
    ("min_tokens", -1, "min_tokens"),
    ("min_tokens", 5, "min_tokens 5 must be <= max_tokens 4"),
    ("logit_bias", {"5": 101}, "logit_bias"),
    ("logit_bias", {"32000": 1}, "logit_bias: token id 32000 is outside the vocabulary"),
    ("logit_bias", {"-1": 1}, "logit_bias"),
    ("logit_bias", {"abc": 1}, "'logit_bias': key 'abc' is not a token id"),
    ("logit_bias", {"5": "x"}, "logit_bias"),
    ("logit_bias", [5], "logit_bias"),
    ("presence_penalty", "high", "presence_penalty"),
]


@pytest.mark.parametrize("endpoint", ["/v1/completions", "/v1/chat/completions"])
def test_http_bad_values_are_400_naming_the_field(deployment, endpoint):
    base = ({"prompt": "hi"} if endpoint == "/v1/completions"
            else {"messages": [{"role": "user", "content": "hi"}]})
    for field, value, says in BAD_VALUES:
        status, answer = post(deployment.http_port, endpoint, {**base, "max_tokens": 4, field: value})
        assert status == 400, (field, value, answer)
        assert says in answer["error"]["message"], (field, value, answer)
        assert answer["error"]["type"] == "invalid_request_error", answer
    # Neutral values are accepted.
    status, answer = post(deployment.http_port, endpoint,
                          {**base, "max_tokens": 2, "presence_penalty": 0, "frequency_penalty": 0,
                           "repetition_penalty": 1, "min_p": 0, "min_tokens": 0, "logit_bias": {}})
    assert status == 200, answer


def test_python_cli_flags(deployment):
    """`python -m baton generate` carries the processors' flags to the server."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "python_client"))
    args = ["generate", "--server", deployment.address, "--prompt-ids", ",".join(map(str, PROMPT)),
            "--max-tokens", "4", "--ignore-eos", "--json", "--logit-bias", "17=100",
            "--repetition-penalty", "1.0", "--presence-penalty", "0", "--frequency-penalty", "0",
            "--min-p", "0", "--min-tokens", "2"]
    proc = subprocess.run([sys.executable, "-m", "baton", *args], capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert [line["token_id"] for line in lines[:-1]] == [17] * 4, proc.stdout
    bad = subprocess.run([sys.executable, "-m", "baton", *args[:-2], "--min-p", "2"],
                         capture_output=True, text=True, timeout=60, env=env)
    assert bad.returncode != 0 and "min_p" in bad.stderr, bad.stderr


@pytest.mark.parametrize("field,value,says", [
    ("presence_penalty", 2.5, "sampling.presence_penalty 2.5 must be in [-2, 2]"),
    ("frequency_penalty", -3.0, "sampling.frequency_penalty -3 must be in [-2, 2]"),
    ("repetition_penalty", -1.0, "sampling.repetition_penalty -1 must be finite and > 0"),
    ("min_p", 1.5, "sampling.min_p 1.5 must be in [0, 1]"),
    ("min_tokens", 5, "stop.min_tokens 5 must be <= max_tokens 4"),
    ("logit_bias", {32000: 1.0}, "sampling.logit_bias: token id 32000 is outside the vocabulary"),
    ("logit_bias", {5: -101.0}, "sampling.logit_bias: bias -101 of token id 5 must be in [-100, 100]"),
])
def test_grpc_bad_values_are_invalid_argument_naming_the_field(deployment, field, value, says):
    with deployment.client() as client:
        with pytest.raises(baton.BatonError) as caught:
            client.complete(prompt="hi", max_tokens=4, **{field: value})
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT, caught.value
    assert says in caught.value.details, caught.value
