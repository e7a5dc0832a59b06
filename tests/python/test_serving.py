"""Baton's serving path with real processes on loopback: `baton serve` starts a scheduler and its
workers (serving_fixtures.py), the Python client (python_client/baton) drives them.

  * parity: greedy output through 1 prefill + 1 decode, 2 prefill + 2 decode and a colocated
    deployment (2 instances) is token-for-token the output of `baton generate --model DIR --json`
    (in-process), through baton.Client, baton.AsyncClient, `baton generate --server` and
    `python -m baton generate`;
  * 64 concurrent streams of mixed prompt and output lengths each get exactly their solo greedy
    tokens, under their own request id;
  * cancellation while queued, while prefilling, after the first token and mid-decode leaves no KV
    block, request or outstanding prefill token on any worker within 1 s (WorkerService.GetStats);
  * malformed requests get INVALID_ARGUMENT (and the CLI exits 2), and the server still serves;
  * a SIGKILLed decode worker: its streaming requests end with UNAVAILABLE within a few seconds; a
    SIGKILLed prefill worker: its request is prefilled again on the other instance and completes;
    either way Health turns DEGRADED naming the worker, new requests succeed on the other instance
    within 2 s, and with no live instance of a phase a request waits WORKER_WAIT_S, then fails;
  * server reflection lists the public service;
  * a decode instance whose KV cache fills swaps requests to its swap_space and back, and each
    gets the tokens of its solo run;
  * SLO admission: once the scheduler has observed an instance, a request predicted to miss
    slo.ttft_ms or slo.tpot_ms gets RESOURCE_EXHAUSTED (HTTP 429 with a JSON error body), and the
    server keeps serving with admission off or a relaxed SLO.
Every deployment is torn down with SIGTERM (then SIGKILL) and must leave no process and no
/dev/shm/baton-kv-* segment behind. The tiny model keeps the whole file within a few minutes.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import numpy as np
import pytest

import baton
from serving_fixtures import (DeploymentFactory, LocalRun, StreamWatcher, assert_same_run_up_to_rounding,
                              generate_args, parse_generate_json, process_alive, random_ids,
                              wait_for_idle_workers, wait_until)

REPO_ROOT = Path(__file__).resolve().parents[2]
PARITY_MAX_TOKENS = 20
CANCEL_CLEANUP_S = 1.0  # every worker idle this long after a cancellation
STEP_SETTLE_S = 1.0  # longer than any engine step of these tests (a 500-token prefill on a busy CPU)
FAILURE_DEADLINE_S = 5.0  # in-flight requests of a killed worker end within this
RECOVERY_DEADLINE_S = 2.0  # a new request succeeds on the surviving instance within this
NO_RESTART = ("--no-worker-restart",)  # the fault tests watch the scheduler cope without the worker
WORKER_WAIT_S = 10.0  # a request waits this long for a live instance of a phase (RequestFlowParams)
REPLAY_MAX_TOKENS = 600  # long enough to be mid-stream when a worker is lost, short enough to compare

PROMPTS = {
    "short": "Hi",
    "sentence": "The quick brown fox jumps over the lazy dog.",
    "paragraph": ("In a hole in the ground there lived a hobbit. Not a nasty, dirty, wet hole, filled "
                  "with the ends of worms and an oozy smell, nor yet a dry, bare, sandy hole with "
                  "nothing in it to sit down on or to eat: it was a hobbit-hole, and that means comfort."),
    "long": " ".join(f"Item {i}: the value of {i} squared is {i * i}." for i in range(40)),
    "unicode": "Ünïcödé — 日本語のテキスト, emoji 🎉 and ñ.",
}


IDS_PROMPT = random_ids(77, seed=77)


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def local_greedy(baton_binary: Path, tiny_model: Path):
    """local_greedy([dict(prompt=... | token_ids=..., max_tokens=N, ignore_eos=B), ...]) ->
    [LocalRun]: `baton generate --model tiny --json`, two processes at a time, cached per request."""
    cache: dict[str, LocalRun] = {}

    def run_one(request: dict) -> LocalRun:
        cmd = [str(baton_binary), "generate", "--model", str(tiny_model), "--json",
               *generate_args(**request)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"{cmd[:6]} failed:\n{proc.stderr}"
        return parse_generate_json(proc.stdout)

    def run(requests: list[dict]) -> list[LocalRun]:
        keys = [json.dumps(r, sort_keys=True) for r in requests]
        todo = {k: r for k, r in zip(keys, requests) if k not in cache}
        with ThreadPoolExecutor(2) as pool:
            for key, result in zip(todo, pool.map(run_one, todo.values())):
                cache[key] = result
        return [cache[k] for k in keys]

    return run


@pytest.fixture(scope="class")
def deployment(request, baton_binary, tiny_model, tmp_path_factory):
    """The deployment the test class describes in DEPLOYMENT (DeploymentFactory.start's arguments);
    stopped, and checked for leftovers, after the class's last test."""
    spec = dict(request.cls.DEPLOYMENT)
    factory = DeploymentFactory(baton_binary, tiny_model, tmp_path_factory.mktemp(spec["name"]))
    yield factory.start(**spec)
    problems = factory.stop_all()
    assert not problems, "\n".join(problems)


# --- helpers ------------------------------------------------------------------------------------


def parity_request(key: str) -> dict:
    if key == "ids":
        return {"token_ids": IDS_PROMPT, "max_tokens": PARITY_MAX_TOKENS}
    return {"prompt": PROMPTS[key], "max_tokens": PARITY_MAX_TOKENS}


PARITY_KEYS = [*PROMPTS, "ids"]


def assert_matches_local(result: baton.Completion, local: LocalRun, what: str) -> None:
    assert list(result.token_ids) == list(local.token_ids), f"{what}: tokens differ from local"
    assert result.text == local.text, f"{what}: text differs from local"
    assert result.finish_reason == local.finish_reason, what
    assert list(result.prompt_token_ids) == list(local.prompt_ids), what
    assert result.num_prompt_tokens == len(local.prompt_ids), what
    assert result.num_generated_tokens == len(local.token_ids), what


def check_parity_concurrently(deployment, local_greedy, keys: list[str], repeats: int) -> None:
    """Sends every prompt `repeats` times at once and compares each result with the local run."""
    requests = [parity_request(k) for k in keys]
    expected = local_greedy(requests)
    with deployment.client() as client, ThreadPoolExecutor(len(keys) * repeats) as pool:
        futures = [(k, e, pool.submit(client.complete, **r))
                   for _ in range(repeats) for k, r, e in zip(keys, requests, expected)]
        for key, local, future in futures:
            assert_matches_local(future.result(), local, f"{deployment.name}/{key}")


def run_cli(*args, timeout: float = 60) -> subprocess.CompletedProcess:
    """`python -m baton ARGS`, stdout and stderr decoded as UTF-8 as they are: generated text may
    hold "\r", which text=True would turn into "\n"."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT / "python_client"))
    proc = subprocess.run([sys.executable, "-m", "baton", *args], capture_output=True,
                          timeout=timeout, env=env)
    proc.stdout = proc.stdout.decode("utf-8")
    proc.stderr = proc.stderr.decode("utf-8")
    return proc


def assert_idle_after_cancel(deployment, cancelled_at: float) -> None:
    remaining = max(0.0, cancelled_at + CANCEL_CLEANUP_S - time.monotonic())
    idle, stats = wait_for_idle_workers(deployment, remaining)
    assert idle, f"workers still busy {CANCEL_CLEANUP_S} s after the cancellation: {stats}"
    # A worker refreshes its stats between engine steps: during a step, GetStats shows the state
    # before it. Once any step that was running has ended, the workers must still be idle (a
    # request whose cancellation was lost would hold its KV for the 30 s lease, or keep decoding).
    time.sleep(STEP_SETTLE_S)
    idle, stats = wait_for_idle_workers(deployment, 0.0)
    assert idle, f"workers busy again {STEP_SETTLE_S} s after they looked idle: {stats}"


# --- the client alone ---------------------------------------------------------------------------


def test_generate_needs_exactly_one_prompt():
    with baton.Client("127.0.0.1:1", timeout=1) as client:  # never called
        with pytest.raises(ValueError):
            client.generate()
        with pytest.raises(ValueError):
            client.generate(prompt="a", token_ids=[1])


def test_completion_joins_chunks():
    timing = baton.Timing
    chunks = [
        baton.Chunk("r", "Hel", (5,), (), None, timing(arrival_us=1, prefill_start_us=2,
                                                      prefill_end_us=3, token_emit_us=(3,))),
        baton.Chunk("r", "lo", (6, 7), (), "length", timing(kv_transfer_start_us=4, kv_transfer_end_us=5,
                                                          token_emit_us=(6, 7)),
                    prompt_token_ids=(0, 9), num_prompt_tokens=2, num_generated_tokens=3),
    ]
    result = baton.Completion.from_chunks(chunks)
    assert (result.text, result.token_ids, result.finish_reason) == ("Hello", (5, 6, 7), "length")
    assert result.timing == timing(1, 2, 3, 4, 5, (3, 6, 7))
    assert (result.prompt_token_ids, result.num_generated_tokens, result.num_chunks) == ((0, 9), 3, 2)


# --- 1 prefill + 1 decode -----------------------------------------------------------------------


@pytest.mark.engine
class TestOnePrefillOneDecode:
    DEPLOYMENT = {"name": "pd11", "num_prefill": 1, "num_decode": 1}

    @pytest.mark.parametrize("key", PARITY_KEYS)
    def test_greedy_matches_local(self, deployment, local_greedy, key):
        request = parity_request(key)
        [local] = local_greedy([request])
        with deployment.client() as client:
            result = client.complete(**request)
        assert_matches_local(result, local, key)
        t = result.timing
        # One host clock: the phases follow each other, tokens are emitted in order.
        assert 0 < t.arrival_us <= t.prefill_start_us <= t.prefill_end_us, t
        if len(result.token_ids) > 1:
            assert t.prefill_end_us <= t.kv_transfer_start_us <= t.kv_transfer_end_us, t
        assert len(t.token_emit_us) == len(result.token_ids)
        assert list(t.token_emit_us) == sorted(t.token_emit_us)

    def test_async_client_matches_local(self, deployment, local_greedy):
        requests = [parity_request(k) for k in ("sentence", "paragraph", "ids")]
        expected = local_greedy(requests)

        async def run():
            async with baton.AsyncClient(deployment.address, timeout=60) as client:
                assert (await client.health()).serving
                return await asyncio.gather(*(client.complete(**r) for r in requests))

        for result, local in zip(asyncio.run(run()), expected):
            assert_matches_local(result, local, "AsyncClient")

    @pytest.mark.parametrize("key", ["sentence", "long", "ids"])
    def test_baton_generate_server_matches_local(self, deployment, local_greedy, run_baton, key):
        request = parity_request(key)
        [local] = local_greedy([request])
        served = parse_generate_json(
            run_baton("generate", "--server", deployment.address, "--json", *generate_args(**request)).stdout)
        assert served.token_ids == local.token_ids
        assert served.prompt_ids == local.prompt_ids
        assert served.finish_reason == local.finish_reason

    @pytest.mark.parametrize("key", ["paragraph", "unicode"])
    def test_python_cli_matches_local(self, deployment, local_greedy, key):
        request = parity_request(key)
        [local] = local_greedy([request])
        text = run_cli("generate", "--server", deployment.address, *generate_args(**request))
        assert text.returncode == 0, text.stderr
        assert text.stdout == local.text + "\n"
        as_json = run_cli("generate", "--server", deployment.address, "--json", *generate_args(**request))
        assert as_json.returncode == 0, as_json.stderr
        served = parse_generate_json(as_json.stdout)
        assert (served.token_ids, served.text, served.finish_reason) == (
            local.token_ids, local.text, local.finish_reason)

    def test_64_concurrent_streams(self, deployment, local_greedy):
        # 16 prompts of 1..400 tokens, each sent 4 times with 1, 5, 12 and 24 output tokens.
        prompt_lens = [1, 3, 7, 15, 16, 17, 31, 33, 64, 100, 127, 150, 200, 255, 300, 400]
        prompts = [random_ids(n, seed=1000 + n) for n in prompt_lens]
        max_tokens = [1, 5, 12, 24]
        refs = local_greedy([{"token_ids": p, "max_tokens": max(max_tokens), "ignore_eos": True}
                             for p in prompts])
        cases = [(i, prompts[i % 16], refs[i % 16], max_tokens[(i // 16 + i) % 4]) for i in range(64)]

        async def one(client, i, prompt, m):
            # Even requests name themselves; the server names the odd ones.
            request_id = f"concurrent-{i}" if i % 2 == 0 else None
            return [c async for c in client.generate(token_ids=prompt, max_tokens=m, ignore_eos=True,
                                                     request_id=request_id)]

        async def run_all():
            async with baton.AsyncClient(deployment.address, timeout=180) as client:
                return await asyncio.gather(*(one(client, i, p, m) for i, p, _, m in cases),
                                            return_exceptions=True)

        results = asyncio.run(run_all())
        errors = [(i, r) for i, r in enumerate(results) if isinstance(r, BaseException)]
        assert not errors, errors[:3]
        request_ids = []
        for (i, prompt, ref, m), chunks in zip(cases, results):
            ids = {c.request_id for c in chunks}
            assert len(ids) == 1 and "" not in ids, (i, ids)
            request_ids.append(ids.pop())
            if i % 2 == 0:
                assert request_ids[-1] == f"concurrent-{i}"
            assert [c.finish_reason for c in chunks[:-1]] == [None] * (len(chunks) - 1)
            result = baton.Completion.from_chunks(chunks)
            assert list(result.token_ids) == list(ref.token_ids[:m]), f"request {i}: lost, extra or wrong tokens"
            assert result.finish_reason == "length"
            assert list(result.prompt_token_ids) == prompt
            assert result.num_generated_tokens == m
            assert len(result.timing.token_emit_us) == m
        assert len(set(request_ids)) == len(request_ids), "a request id was used twice"
        idle, stats = wait_for_idle_workers(deployment, 5.0)
        assert idle, stats

    @pytest.mark.parametrize("kwargs", [
        pytest.param({"prompt": ""}, id="empty-prompt"),
        pytest.param({"token_ids": []}, id="empty-token-ids"),
        pytest.param({"token_ids": [5] * 2048}, id="prompt-fills-context"),
        pytest.param({"token_ids": [5] * 3000}, id="prompt-over-context"),
        pytest.param({"prompt": "word " * 3000}, id="text-over-context"),
        pytest.param({"token_ids": [5] * 2000, "max_tokens": 100}, id="prompt-plus-max-tokens-over-context"),
        # prompt + max_tokens overflows an int32: the sum must not wrap below max_model_len.
        pytest.param({"prompt": "hi", "max_tokens": 2**31 - 1}, id="max-tokens-int32-max"),
        pytest.param({"prompt": "hi", "max_tokens": 0}, id="max-tokens-0"),
        pytest.param({"prompt": "hi", "max_tokens": -3}, id="max-tokens-negative"),
        pytest.param({"prompt": "hi", "temperature": -0.5}, id="temperature-negative"),
        pytest.param({"prompt": "hi", "temperature": float("nan")}, id="temperature-nan"),
        pytest.param({"prompt": "hi", "top_p": 1.5}, id="top-p-over-1"),
        pytest.param({"prompt": "hi", "top_p": -0.1}, id="top-p-negative"),
        pytest.param({"prompt": "hi", "top_k": -1}, id="top-k-negative"),
        pytest.param({"prompt": "hi", "logprobs": 21}, id="logprobs-21"),
        pytest.param({"prompt": "hi", "logprobs": -1}, id="logprobs-negative"),
        pytest.param({"token_ids": [2, 32000]}, id="token-id-past-vocab"),
        pytest.param({"token_ids": [2, -1]}, id="token-id-negative"),
        pytest.param({"prompt": "hi", "stop": [""]}, id="empty-stop-string"),
    ])
    def test_bad_request_is_invalid_argument(self, deployment, kwargs):
        with deployment.client(timeout=30) as client:
            with pytest.raises(baton.BatonError) as caught:
                client.complete(**kwargs)
            assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT, caught.value
            assert caught.value.details
            # The server still serves.
            result = client.complete(prompt="hello", max_tokens=3)
            assert result.finish_reason in ("length", "stop") and result.num_generated_tokens >= 1

    def test_an_unknown_model_is_not_found_in_vllms_words(self, deployment):
        with deployment.client(timeout=30) as client:
            with pytest.raises(baton.BatonError) as caught:
                client.complete(prompt="hi", model="no-such-model")
            assert caught.value.code == grpc.StatusCode.NOT_FOUND, caught.value
            assert caught.value.details == "The model `no-such-model` does not exist."

    def test_served_model_name_and_top_p_zero_are_accepted(self, deployment):
        with deployment.client() as client:
            name = client.model_info().model
            # top_p 0 means "unset" (1) in the proto.
            assert client.complete(prompt="hi", max_tokens=2, model=name, top_p=0).num_generated_tokens == 2

    def test_cli_exit_codes(self, deployment):
        bad = run_cli("generate", "--server", deployment.address, "--prompt", "hi", "--max-tokens", "0")
        assert bad.returncode == 2
        assert bad.stdout == ""
        assert bad.stderr.count("\n") == 1 and "INVALID_ARGUMENT" in bad.stderr, bad.stderr
        for usage in [run_cli("generate", "--server", deployment.address),  # no prompt
                      run_cli("generate", "--server", deployment.address, "--prompt-ids", "1,x")]:
            assert usage.returncode == 2 and usage.stdout == "", usage.stderr
        with socket.socket() as sock:  # a port nobody listens on
            sock.bind(("127.0.0.1", 0))
            closed_port = sock.getsockname()[1]
        down = run_cli("generate", "--server", f"127.0.0.1:{closed_port}", "--prompt", "hi",
                       "--timeout", "10")
        assert down.returncode == 1
        assert down.stderr.count("\n") == 1 and "UNAVAILABLE" in down.stderr, down.stderr
        health = run_cli("health", "--server", deployment.address)
        assert (health.returncode, health.stdout) == (0, "SERVING\n")
        info = run_cli("model-info", "--server", deployment.address)
        assert info.returncode == 0 and json.loads(info.stdout)["vocab_size"] == 32000

    def test_health_and_model_info(self, deployment, tiny_model):
        config = json.loads((tiny_model / "config.json").read_text())
        with deployment.client() as client:
            health = client.health()
            assert (health.status, health.problems) == ("SERVING", ())
            info = client.model_info()
        assert info.model == tiny_model.name
        assert info.architecture == config["architectures"][0]
        assert info.max_model_len == config["max_position_embeddings"]
        assert info.vocab_size == config["vocab_size"]
        assert info.dtype == "f32"
        assert info.bos_token_id == config["bos_token_id"]
        assert list(info.eos_token_ids) == [config["eos_token_id"]]

    def test_stop_strings_and_logprobs(self, deployment, local_greedy):
        [local] = local_greedy([parity_request("paragraph")])
        with deployment.client() as client:
            full = client.complete(prompt=PROMPTS["paragraph"], max_tokens=PARITY_MAX_TOKENS, logprobs=3)
            assert len(full.logprobs) == len(full.token_ids)
            for token_id, top in zip(full.token_ids, full.logprobs):
                assert len(top) == 3
                assert top[0].token_id == token_id  # greedy takes the most likely token
                assert [lp.logprob for lp in top] == sorted((lp.logprob for lp in top), reverse=True)
            # Stop at a piece of text that the greedy output contains: it ends there, without it.
            stop = local.text[len(local.text) // 2:][:3]
            if stop.strip():
                stopped = client.complete(prompt=PROMPTS["paragraph"], max_tokens=PARITY_MAX_TOKENS,
                                          stop=[stop])
                assert stopped.finish_reason == "stop"
                assert stopped.text == local.text[:local.text.index(stop)]
            ids = client.complete(prompt=PROMPTS["paragraph"], max_tokens=PARITY_MAX_TOKENS,
                                  stop_token_ids=[local.token_ids[4]])
            assert ids.finish_reason == "stop"
            assert list(ids.token_ids) == list(local.token_ids[:local.token_ids.index(local.token_ids[4]) + 1])

    def test_server_reflection_lists_the_public_api(self, deployment):
        reflection = pytest.importorskip("grpc_reflection.v1alpha.proto_reflection_descriptor_database")
        with grpc.insecure_channel(deployment.address) as channel:
            database = reflection.ProtoReflectionDescriptorDatabase(channel)
            assert "baton.v1.InferenceService" in database.get_services()
            proto = database.FindFileContainingSymbol("baton.v1.InferenceService")
            assert proto.name == "baton/v1/inference.proto"
            assert [m.name for m in proto.service[0].method] == ["Generate", "Health", "GetModelInfo"]


# --- 2 prefill + 2 decode, colocated ------------------------------------------------------------


@pytest.mark.engine
class TestTwoPrefillTwoDecode:
    DEPLOYMENT = {"name": "pd22", "num_prefill": 2, "num_decode": 2}

    def test_greedy_matches_local_sequentially(self, deployment, local_greedy):
        expected = local_greedy([parity_request(k) for k in PARITY_KEYS])
        with deployment.client() as client:
            for key, local in zip(PARITY_KEYS, expected):
                assert_matches_local(client.complete(**parity_request(key)), local, key)

    def test_greedy_matches_local_concurrently(self, deployment, local_greedy):
        # Concurrent requests spread over both instances of each phase.
        check_parity_concurrently(deployment, local_greedy, PARITY_KEYS, repeats=2)

    def test_baton_generate_server_matches_local(self, deployment, local_greedy, run_baton):
        request = parity_request("paragraph")
        [local] = local_greedy([request])
        served = parse_generate_json(
            run_baton("generate", "--server", deployment.address, "--json", *generate_args(**request)).stdout)
        assert served.token_ids == local.token_ids


@pytest.mark.engine
class TestColocated:
    DEPLOYMENT = {"name": "colocated2", "mode": "colocated", "num_colocated": 2}

    def test_greedy_matches_local_sequentially(self, deployment, local_greedy):
        expected = local_greedy([parity_request(k) for k in PARITY_KEYS])
        with deployment.client() as client:
            for key, local in zip(PARITY_KEYS, expected):
                result = client.complete(**parity_request(key))
                assert_matches_local(result, local, key)
                assert result.timing.kv_transfer_start_us == 0  # nothing migrates
                assert 0 < result.timing.prefill_start_us <= result.timing.prefill_end_us

    def test_greedy_matches_local_concurrently(self, deployment, local_greedy):
        check_parity_concurrently(deployment, local_greedy, PARITY_KEYS, repeats=2)

    def test_baton_generate_server_matches_local(self, deployment, local_greedy, run_baton):
        request = parity_request("long")
        [local] = local_greedy([request])
        served = parse_generate_json(
            run_baton("generate", "--server", deployment.address, "--json", *generate_args(**request)).stdout)
        assert served.token_ids == local.token_ids

    def test_cancel_mid_decode_frees_everything(self, deployment):
        with deployment.client() as client:
            stream = client.generate(token_ids=random_ids(40, seed=5), max_tokens=1000, ignore_eos=True)
            chunks = [next(stream) for _ in range(5)]
            assert all(c.finish_reason is None for c in chunks)
            stream.cancel()
            cancelled_at = time.monotonic()
            with pytest.raises(baton.BatonError) as caught:
                list(stream)
            assert caught.value.code == grpc.StatusCode.CANCELLED
        assert_idle_after_cancel(deployment, cancelled_at)


# --- swap space ---------------------------------------------------------------------------------

# tiny: 6 layers x 2 (K, V) x 6 KV heads x 48 dims x 4 bytes = 13824 bytes a token, 16 a block.
TINY_KV_BLOCK_BYTES = 16 * 13824


@pytest.mark.engine
class TestSwapSpace:
    # The decode instance holds 24 blocks (384 tokens): twelve requests of 20 + 100 tokens admitted
    # at 2 blocks each outgrow it, and the ones preempted go to the 64 MiB swap space and back.
    DEPLOYMENT = {"name": "swap", "config": {"max_model_len": 256},
                  "decode": {"kv_cache_bytes": 24 * TINY_KV_BLOCK_BYTES, "swap_space": "64MiB"}}

    def test_swapped_requests_get_their_solo_tokens(self, deployment, local_greedy):
        prompts = [random_ids(20, seed=2000 + i) for i in range(12)]
        refs = local_greedy([{"token_ids": p, "max_tokens": 100, "ignore_eos": True} for p in prompts])
        most_swapped = 0
        done = False

        def watch():
            nonlocal most_swapped
            while not done:
                stats = deployment.worker_stats_of("decode worker 0")
                most_swapped = max(most_swapped, stats.num_requests_swapped)
                time.sleep(0.005)

        with deployment.client(timeout=180) as client, ThreadPoolExecutor(13) as pool:
            watcher = pool.submit(watch)
            futures = [pool.submit(client.complete, token_ids=p, max_tokens=100, ignore_eos=True)
                       for p in prompts]
            try:
                results = [f.result() for f in futures]
            finally:
                done = True
            watcher.result()
        for i, (result, ref) in enumerate(zip(results, refs)):
            assert list(result.token_ids) == list(ref.token_ids), f"request {i}: tokens differ from its solo run"
        assert most_swapped > 0, "the decode cache never filled: the test proves nothing"
        idle, stats = wait_for_idle_workers(deployment, 5.0)
        assert idle, stats


# --- cancellation -------------------------------------------------------------------------------


@pytest.mark.engine
class TestCancellation:
    # One sequence per prefill step: requests behind a flood wait in the prefill worker's queue.
    DEPLOYMENT = {"name": "cancel", "num_prefill": 1, "num_decode": 1, "prefill": {"max_num_seqs": 1}}

    @pytest.fixture(autouse=True)
    def starts_idle(self, deployment):
        idle, stats = wait_for_idle_workers(deployment, 30.0)
        assert idle, f"a previous test left work behind: {stats}"

    def prefill_stats(self, deployment):
        return deployment.worker_stats()["prefill worker 0"]

    def test_cancel_while_queued(self, deployment):
        flood_len, num_floods, target_len = 300, 4, 5
        with deployment.client() as client:
            floods = [StreamWatcher(client.generate(token_ids=random_ids(flood_len, seed=s), max_tokens=1))
                      for s in range(num_floods)]
            # The floods reach the worker first; the target queues behind them.
            assert wait_until(lambda: self.prefill_stats(deployment).num_prefill_tokens_outstanding > 0, 10)
            target = StreamWatcher(client.generate(token_ids=random_ids(target_len, seed=99), max_tokens=8))
            queued = wait_until(
                lambda: (s := self.prefill_stats(deployment)).num_requests_waiting >= 1
                and s.num_prefill_tokens_outstanding >= flood_len + target_len  # a flood ahead
                and s.num_prefill_tokens_outstanding % flood_len == target_len,  # the target in
                10, interval=0.005)
            assert queued and not target.chunks, "the target request never waited in the queue"
            target.stream.cancel()
            cancelled_at = time.monotonic()
            for flood in floods:
                flood.stream.cancel()
            assert target.join(5) and target.error is not None
            assert target.error.code == grpc.StatusCode.CANCELLED and not target.chunks
            for flood in floods:
                assert flood.join(5)
        assert_idle_after_cancel(deployment, cancelled_at)

    def test_cancel_while_prefilling(self, deployment):
        prompt = random_ids(500, seed=500)
        with deployment.client() as client:
            target = StreamWatcher(client.generate(token_ids=prompt, max_tokens=8))
            # Nothing else runs: once the worker counts the prompt, its prefill step is under way.
            assert wait_until(lambda: self.prefill_stats(deployment).num_prefill_tokens_outstanding
                              == len(prompt), 10, interval=0.002)
            assert not target.chunks
            target.stream.cancel()
            cancelled_at = time.monotonic()
            assert target.join(5)
            assert target.error is not None and target.error.code == grpc.StatusCode.CANCELLED
        assert_idle_after_cancel(deployment, cancelled_at)

    @pytest.mark.parametrize("num_chunks", [1, 6], ids=["after-first-token", "mid-decode"])
    def test_cancel_after_tokens(self, deployment, num_chunks):
        with deployment.client() as client:
            stream = client.generate(token_ids=random_ids(50, seed=50), max_tokens=1000, ignore_eos=True)
            chunks = [next(stream) for _ in range(num_chunks)]
            stream.cancel()
            cancelled_at = time.monotonic()
            assert all(c.finish_reason is None for c in chunks)
            with pytest.raises(baton.BatonError) as caught:
                list(stream)
            assert caught.value.code == grpc.StatusCode.CANCELLED
        assert_idle_after_cancel(deployment, cancelled_at)

    def test_async_cancel_mid_decode(self, deployment):
        async def run():
            async with baton.AsyncClient(deployment.address, timeout=60) as client:
                stream = client.generate(token_ids=random_ids(40, seed=40), max_tokens=1000, ignore_eos=True)
                chunks = [await stream.__anext__() for _ in range(3)]
                stream.cancel()
                cancelled_at = time.monotonic()
                with pytest.raises(baton.BatonError) as caught:
                    await stream.__anext__()
                assert caught.value.code == grpc.StatusCode.CANCELLED
                # Cancelling the task that iterates a stream cancels its call as well.
                consumer = asyncio.ensure_future(client.complete(token_ids=random_ids(40, seed=41),
                                                                 max_tokens=1000, ignore_eos=True))
                await asyncio.sleep(0.3)
                consumer.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await consumer
                return chunks, cancelled_at

        chunks, _ = asyncio.run(run())
        assert all(c.finish_reason is None for c in chunks)
        assert_idle_after_cancel(deployment, time.monotonic())

    def test_cancel_storm_frees_everything(self, deployment):
        """32 streams cancelled at random moments in their first 300 ms (queued, prefilling, held
        by the prefill worker for the hand-off, pulled, decoding): within CANCEL_CLEANUP_S of the
        last cancel no worker holds anything (before, a cancelled request's held KV could stay until
        its 30 s lease passed)."""
        rng = np.random.default_rng(32)
        with deployment.client() as client:
            watchers = [StreamWatcher(client.generate(token_ids=random_ids(int(rng.integers(5, 200)), seed=600 + i),
                                                      max_tokens=1000, ignore_eos=True))
                        for i in range(32)]
            started = time.monotonic()
            for w, delay in sorted(zip(watchers, rng.uniform(0.0, 0.3, len(watchers))), key=lambda x: x[1]):
                time.sleep(max(0.0, started + delay - time.monotonic()))
                w.stream.cancel()
            cancelled_at = time.monotonic()
            for w in watchers:
                assert w.join(5)
                assert w.error is not None and w.error.code == grpc.StatusCode.CANCELLED, w.error
        assert_idle_after_cancel(deployment, cancelled_at)

    def test_deadline_frees_everything(self, deployment):
        with deployment.client() as client:
            with pytest.raises(baton.BatonError) as caught:
                client.complete(token_ids=random_ids(60, seed=60), max_tokens=1000, ignore_eos=True,
                                timeout=0.5)
            expired_at = time.monotonic()
            assert caught.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
        assert_idle_after_cancel(deployment, expired_at)

    def test_client_disconnect_frees_everything(self, deployment):
        # Closing the channel (a client going away) cancels its calls like an explicit cancel.
        client = deployment.client()
        stream = client.generate(token_ids=random_ids(30, seed=30), max_tokens=1000, ignore_eos=True)
        next(stream), next(stream)
        client.close()
        closed_at = time.monotonic()
        with pytest.raises(baton.BatonError):
            list(stream)
        assert_idle_after_cancel(deployment, closed_at)


# --- worker failures ----------------------------------------------------------------------------


def start_long_streams(client: baton.Client, count: int, prompt_len: int, max_tokens: int):
    return [StreamWatcher(client.generate(token_ids=random_ids(prompt_len, seed=2000 + i),
                                          max_tokens=max_tokens, ignore_eos=True))
            for i in range(count)]


def check_failed_over(deployment, victim: str, watchers, victims_expected: int, killed_at: float):
    """The killed worker's requests end with UNAVAILABLE within FAILURE_DEADLINE_S and the others
    keep going; Health names the victim; new requests succeed within RECOVERY_DEADLINE_S."""
    with deployment.client(timeout=10) as client:
        recovered_at = None
        while time.monotonic() < killed_at + RECOVERY_DEADLINE_S and recovered_at is None:
            try:
                if client.complete(prompt="after the failure", max_tokens=3).num_generated_tokens == 3:
                    recovered_at = time.monotonic()
            except baton.BatonError:
                time.sleep(0.05)
        assert recovered_at is not None, f"no request succeeded within {RECOVERY_DEADLINE_S} s of the kill"
        for _ in range(4):  # and they keep succeeding
            assert client.complete(prompt="still serving", max_tokens=3).num_generated_tokens == 3

        assert wait_until(lambda: sum(w.ended_at is not None for w in watchers) >= victims_expected,
                          FAILURE_DEADLINE_S), "in-flight requests of the killed worker hang"
        failed = [w for w in watchers if w.ended_at is not None]
        assert len(failed) == victims_expected, [w.error for w in failed]
        for w in failed:
            assert w.error is not None and w.error.code == grpc.StatusCode.UNAVAILABLE, w.error
            assert w.ended_at - killed_at < FAILURE_DEADLINE_S
        survivors = [w for w in watchers if w.ended_at is None]
        progress = [w.num_tokens() for w in survivors]
        assert wait_until(lambda: all(w.num_tokens() > n for w, n in zip(survivors, progress)), 10), \
            "requests on the surviving workers stalled"

        health = client.health()
        assert health.status in ("DEGRADED", "NOT_SERVING"), health
        assert any(victim in problem for problem in health.problems), health
        assert deployment.stderr.wait_for(rf"{victim} \(pid {deployment.pids[victim]}\).*signal 9", 5), \
            deployment.log()
        for w in survivors:
            w.stream.cancel()
            assert w.join(5)


@pytest.mark.engine
class TestWorkerFailure:
    def test_the_launcher_reports_a_worker_exit_at_once(self, fresh_deployments):
        """A worker that dies is cut off when the launcher sees it exit, not a heartbeat timeout
        later: the registry names the exit, not silence."""
        deployment = fresh_deployments.start("report-exit", serve_args=NO_RESTART)
        pid = deployment.pids["decode worker 0"]
        assert deployment.list_workers()["decode worker 0"].alive
        deployment.kill("decode worker 0")
        assert wait_until(lambda: not deployment.list_workers()["decode worker 0"].alive, 10)
        death = deployment.list_workers()["decode worker 0"].death
        assert death == "exited (killed by signal 9 (SIGKILL))", death
        assert deployment.stderr.wait_for(
            rf"^baton scheduler: decode worker 0 \(pid {pid}\): exited \(killed by signal 9 \(SIGKILL\)\), "
            r"said the launcher$", 5), deployment.log()

    @pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "frozen"])
    def test_decode_worker_lost_mid_stream(self, fresh_deployments, sig):
        """Token replay: the streams of a decode worker killed (or frozen, then marked dead when its
        heartbeats stop) go on on the other one with no token lost or repeated: each is what a
        fault-free run of the same request samples (greedy, and seeded at temperature 1), up to the
        rounding that separates a prefill of the streamed tokens from the decode steps that made them
        (assert_same_run_up_to_rounding)."""
        deployment = fresh_deployments.start(f"decode-{sig.name}", num_prefill=1, num_decode=2,
                                             serve_args=NO_RESTART)
        requests = [dict(token_ids=random_ids(20, seed=4000 + i), max_tokens=REPLAY_MAX_TOKENS,
                         ignore_eos=True, **({} if i % 2 == 0 else {"temperature": 1.0, "seed": 70 + i}))
                    for i in range(6)]
        with deployment.client(timeout=120) as client:
            watchers = [StreamWatcher(client.generate(**r)) for r in requests]
            assert wait_until(lambda: all(w.num_tokens() >= 3 for w in watchers), 60), \
                [w.error for w in watchers]
            running = {name: s.num_requests_running for name, s in deployment.worker_stats().items()}
            victim = max(("decode worker 0", "decode worker 1"), key=running.get)
            deployment.kill(victim, sig)
            progress = [w.num_tokens() for w in watchers]
            assert sum(n < REPLAY_MAX_TOKENS for n in progress) > 0, "every stream ended before the loss"
            for w in watchers:
                assert w.join(120), "a stream hangs"
            assert [w.error for w in watchers] == [None] * 6
            # The same requests, fault-free now on the surviving worker, sample the same tokens.
            for i, (r, w) in enumerate(zip(requests, watchers)):
                streamed = [t for c in w.chunks for t in c.token_ids]
                assert len(streamed) == REPLAY_MAX_TOKENS, f"request {i}"
                assert_same_run_up_to_rounding(client, r, streamed, list(client.complete(**r).token_ids),
                                               f"request {i}")
            health = client.health()
            assert health.status in ("DEGRADED", "NOT_SERVING"), health
            assert any(victim in problem for problem in health.problems), health
            if sig == signal.SIGSTOP:
                deployment.kill(victim)
            # Without any decode worker, a request waits a bounded time for one, then fails.
            last = next(w for w in ("decode worker 0", "decode worker 1") if w != victim)
            deployment.kill(last)
            started = time.monotonic()
            with pytest.raises(baton.BatonError) as caught:
                client.complete(prompt="nobody decodes", max_tokens=3, timeout=60)
            assert caught.value.code == grpc.StatusCode.UNAVAILABLE, caught.value
            assert "no live decode worker" in str(caught.value), caught.value
            assert time.monotonic() - started < WORKER_WAIT_S + FAILURE_DEADLINE_S
            health = client.health()
            assert health.status == "NOT_SERVING", health
            assert any(last in problem for problem in health.problems), health

    def test_prefill_worker_killed(self, fresh_deployments):
        deployment = fresh_deployments.start("prefill-kill", num_prefill=2, num_decode=1,
                                             serve_args=NO_RESTART)
        with deployment.client(timeout=120) as client:
            # Prefill worker 0 is frozen first, so the prompt routed to it is certainly in flight
            # there when it dies, however fast the machine: timing-free, unlike catching a prefill
            # mid-way by polling. Two prompts at once go one per prefill worker (the scheduler's
            # fewest outstanding tokens).
            deployment.kill("prefill worker 0", signal.SIGSTOP)
            watchers = [StreamWatcher(client.generate(token_ids=random_ids(300, seed=3000 + i),
                                                      max_tokens=400, ignore_eos=True))
                        for i in range(2)]
            assert wait_until(lambda: any(w.chunks for w in watchers), 60), [w.error for w in watchers]
            assert wait_until(
                lambda: deployment.worker_stats_of("prefill worker 1").num_prefill_tokens_outstanding == 0, 10)
            time.sleep(0.2)  # worker 1's first tokens reach their streams
            assert sum(bool(w.chunks) for w in watchers) == 1, "both prompts went to prefill worker 1"
            deployment.kill("prefill worker 0")
            killed_at = time.monotonic()
            # No request is lost: the frozen worker's prompt runs again on prefill worker 1, and both
            # streams keep going (check_failed_over: none ended, every one makes progress).
            check_failed_over(deployment, "prefill worker 0", watchers, 0, killed_at)
            assert all(w.chunks for w in watchers)

    def test_serve_restarts_a_dead_worker(self, fresh_deployments):
        """`baton serve` starts a killed worker again; a request sent while it is down waits for the
        new incarnation and completes, and Health is SERVING again."""
        deployment = fresh_deployments.start("restart", num_prefill=1, num_decode=1)
        request = dict(token_ids=random_ids(20, seed=5000), max_tokens=8, ignore_eos=True)
        with deployment.client(timeout=60) as client:
            before = list(client.complete(**request).token_ids)
            old_pid = deployment.pids["decode worker 0"]
            deployment.kill("decode worker 0")
            # Sent while the only decode worker is down: it waits for one (WORKER_WAIT_S). Health is
            # DEGRADED meanwhile (as the tests above check), for about as long as the launcher's
            # 1 s wait: too short a window to poll for here.
            assert list(client.complete(**request).token_ids) == before
            new_pid = deployment.restarted_pid("decode worker 0", restart=1, timeout=5)
            assert new_pid is not None and new_pid != old_pid, deployment.log()
            assert process_alive(new_pid)
            assert wait_until(lambda: client.health().status == "SERVING", 10), client.health()
        assert deployment.stderr.wait_for(r"^baton: restarting decode worker 0 in 1s$", 0), deployment.log()

    def test_serve_restarts_a_frozen_worker(self, fresh_deployments):
        """A decode worker frozen mid-stream is cut off by the scheduler, killed by the launcher and
        started again; the stream, replayed onto the new incarnation, completes with every token."""
        deployment = fresh_deployments.start("restart-frozen", num_prefill=1, num_decode=1)
        with deployment.client(timeout=120) as client:
            watcher = StreamWatcher(client.generate(token_ids=random_ids(20, seed=5100), max_tokens=1000,
                                                    ignore_eos=True))
            assert wait_until(lambda: watcher.num_tokens() >= 3, 60), watcher.error
            frozen = deployment.pids["decode worker 0"]
            deployment.kill("decode worker 0", signal.SIGSTOP)
            assert deployment.stderr.wait_for(
                rf"^baton: the scheduler cut off decode worker 0 \(pid {frozen}: no heartbeat for .*\); "
                r"killing it to restart it$", 10), deployment.log()
            restarted = deployment.restarted_pid("decode worker 0", restart=1, timeout=10)
            assert restarted is not None and restarted != frozen, deployment.log()
            assert watcher.join(60), "the stream hangs"
            assert watcher.error is None and watcher.num_tokens() == 1000, (watcher.error, watcher.num_tokens())
            assert wait_until(lambda: not process_alive(frozen), 5)


# --- shutdown ------------------------------------------------------------------------------------


@pytest.mark.engine
def test_a_non_streaming_http_client_that_leaves_cancels_its_request(fresh_deployments):
    """The scheduler notices the hang-up (the connection's FIN) at the request's next chunk and
    cancels it on the workers, rather than generating every token for nobody."""
    deployment = fresh_deployments.start("http-leave", http=True)
    body = json.dumps({"prompt": [int(t) for t in random_ids(20, seed=7)], "max_tokens": 1900,
                       "ignore_eos": True}).encode()
    with socket.create_connection(("127.0.0.1", deployment.http_port), timeout=10) as client:
        client.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        decoding = lambda: deployment.worker_stats()["decode worker 0"].num_requests_running == 1
        assert wait_until(decoding, 30), deployment.worker_stats()
    # 1900 tokens take several seconds to generate; a cancelled request frees its worker at once.
    idle, stats = wait_for_idle_workers(deployment, 1.5)
    assert idle, f"the request kept running after its client left: {stats}"
    with deployment.client() as grpc_client:  # and the deployment serves on
        assert grpc_client.complete(prompt="next", max_tokens=3, ignore_eos=True).num_generated_tokens == 3


@pytest.mark.engine
def test_sigterm_drains_executing_requests(fresh_deployments):
    """SIGTERM to `baton serve`: new requests are refused (UNAVAILABLE / HTTP 503 "draining"),
    the streams already running finish with every token, then every process stops (exit 0)."""
    deployment = fresh_deployments.start("drain", http=True)
    with deployment.client(timeout=120) as client:
        watchers = start_long_streams(client, count=2, prompt_len=20, max_tokens=1000)
        assert wait_until(lambda: all(w.num_tokens() >= 3 for w in watchers), 60), \
            [w.error for w in watchers]
        deployment.launcher.send_signal(signal.SIGTERM)
        assert deployment.stderr.wait_for(r"baton scheduler: draining 2 requests", 10), deployment.log()
        with pytest.raises(baton.BatonError) as refused:
            client.complete(prompt="too late", max_tokens=3)
        assert refused.value.code == grpc.StatusCode.UNAVAILABLE
        assert "draining" in str(refused.value)
        status, body = post_completion(deployment.http_port, {"prompt": "too late", "max_tokens": 3})
        assert status == 503 and "draining" in body["error"]["message"], body
        for w in watchers:
            assert w.join(60), "a draining stream did not finish"
            assert w.error is None and w.num_tokens() == 1000, (w.error, w.num_tokens())
    assert deployment.launcher.wait(30) == 0
    assert "requests cut" not in deployment.stderr.text()


@pytest.mark.engine
def test_http_logprobs_always_hold_the_sampled_token_and_offsets(fresh_deployments):
    """OpenAI completions logprobs at temperature 1: the sampled token's logprob is reported (in
    token_logprobs and top_logprobs) even when it is not among the top `logprobs`, text_offset
    counts the characters before each token; a stream with include_usage has "usage": null on every
    chunk but the last."""
    deployment = fresh_deployments.start("http-logprobs", http=True)
    body = {"prompt": "The license", "max_tokens": 24, "temperature": 1.0, "seed": 3, "logprobs": 1,
            "ignore_eos": True}
    status, out = post_completion(deployment.http_port, body)
    assert status == 200, out
    choice = out["choices"][0]
    logprobs = choice["logprobs"]
    assert len(logprobs["tokens"]) == 24
    offset = 0
    outside_top = 0
    for token, logprob, top, text_offset in zip(logprobs["tokens"], logprobs["token_logprobs"],
                                                logprobs["top_logprobs"], logprobs["text_offset"]):
        assert logprob is not None and logprob < 0 or logprob == 0, logprob
        assert top[token] == logprob, (token, top)
        assert len(top) in (1, 2)
        outside_top += len(top) == 2
        assert text_offset == offset
        offset += len(token)
    assert outside_top > 0, "every sampled token was the most likely one: pick another seed"
    # The stream carries the same figures, chunk by chunk.
    status, text = post_completion(deployment.http_port, {**body, "stream": True,
                                                          "stream_options": {"include_usage": True}})
    assert status == 200
    events = [json.loads(line[len("data: "):]) for line in text.splitlines()
              if line.startswith("data: ") and line != "data: [DONE]"]
    assert all(event["usage"] is None for event in events[:-1])
    assert events[-1]["usage"]["completion_tokens"] == 24
    streamed = [lp for event in events[:-1] for lp in event["choices"][0]["logprobs"]["token_logprobs"]]
    assert streamed == logprobs["token_logprobs"]
    offsets = [o for event in events[:-1] for o in event["choices"][0]["logprobs"]["text_offset"]]
    assert offsets == logprobs["text_offset"]


@pytest.mark.engine
def test_http_models_retrieve_unknown_model_and_max_tokens_null(fresh_deployments):
    deployment = fresh_deployments.start("http-models", http=True)
    base = f"http://127.0.0.1:{deployment.http_port}"
    with deployment.client() as client:
        name = client.model_info().model
    with urllib.request.urlopen(f"{base}/v1/models/{name}", timeout=10) as response:
        model = json.loads(response.read())
    assert model["id"] == name and model["object"] == "model" and model["max_model_len"] == 2048
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(f"{base}/v1/models/nope", timeout=10)
    assert caught.value.code == 404
    assert json.loads(caught.value.read())["error"]["message"] == "The model `nope` does not exist."
    # Fields not honoured yet are refused at their non-neutral values, accepted at the neutral ones
    # (the logits processors' fields are honoured: test_logits_processors.py).
    status, body = post_completion(deployment.http_port, {"prompt": "hi", "suffix": "end"})
    assert status == 400 and "'suffix' is not supported yet" in body["error"]["message"], body
    status, body = post_completion(deployment.http_port, {"prompt": "hi", "max_tokens": 2,
                                                          "suffix": "", "frequency_penalty": 1.0})
    assert status == 200, body
    # stop_token_ids over HTTP as over gRPC: the first generated token stops it.
    with deployment.client() as client:
        first = client.complete(token_ids=[5, 6, 7], max_tokens=1).token_ids[0]
    status, body = post_completion(deployment.http_port, {"prompt": [5, 6, 7], "max_tokens": 8,
                                                          "temperature": 0, "stop_token_ids": [first]})
    assert status == 200 and body["choices"][0]["finish_reason"] == "stop", body
    assert body["usage"]["completion_tokens"] == 1, body
    status, body = post_completion(deployment.http_port, {"prompt": "hi", "model": "nope"})
    assert status == 404 and body["error"]["message"] == "The model `nope` does not exist.", body
    # max_tokens absent: OpenAI's 16; null: up to the context length, as vLLM reads it.
    status, body = post_completion(deployment.http_port, {"prompt": [5, 6, 7], "ignore_eos": True})
    assert status == 200 and body["usage"]["completion_tokens"] == 16, body
    status, body = post_completion(deployment.http_port, {"prompt": [5, 6, 7], "ignore_eos": True,
                                                          "max_tokens": None, "temperature": 0},
                                   timeout=120)
    assert status == 200, body
    assert body["usage"]["completion_tokens"] == 2048 - 3 and body["choices"][0]["finish_reason"] == "length"


# --- SLO admission --------------------------------------------------------------------------------

ADMISSION_PROMPT = random_ids(300, seed=300)  # long enough that its prefill takes well over 1 ms
# The prompt's tokens the prefill would compute: all 300, or 12 once the scheduler's prefix index
# holds the first request's 18 cached blocks (a heartbeat after it ran).
TTFT_REJECTION = re.compile(
    r"predicted TTFT \S+ ms exceeds the 1\.00 ms SLO \(prefill worker 0: prefill queue 0 \+ (?:300|12) "
    r"prompt tokens at \d+ tokens/s\); retry later")


def post_completion(port: int, body: dict, timeout: float = 30) -> tuple[int, dict | str]:
    """POST /v1/completions; (HTTP status, the parsed JSON body, or the raw text of an SSE body)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                     data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read().decode()
    return status, (text if text.startswith("data:") else json.loads(text))


@pytest.mark.engine
class TestSloAdmission:
    """slo.ttft_ms / slo.tpot_ms in the config: the scheduler admits until it has observed an
    instance, then answers requests predicted to miss an SLO with RESOURCE_EXHAUSTED (gRPC) or 429
    (HTTP) at once, and keeps serving the rest."""

    def test_ttft_slo_sheds_load_over_grpc_and_http(self, fresh_deployments):
        deployment = fresh_deployments.start("slo-ttft", slo={"ttft_ms": 1}, http=True)
        assert deployment.stderr.wait_for(
            r"baton scheduler: admission \(TTFT SLO 1\.00 ms, TPOT SLO off\): rejected 0 of 0", 5), \
            deployment.log()
        with deployment.client() as client:
            # Nothing observed yet: admitted.
            first = client.complete(token_ids=ADMISSION_PROMPT, max_tokens=2, ignore_eos=True)
            assert first.num_generated_tokens == 2
            # The scheduler has seen one 300-token prefill: the same prompt cannot meet 1 ms.
            with pytest.raises(baton.BatonError) as caught:
                client.complete(token_ids=ADMISSION_PROMPT, max_tokens=2)
            assert caught.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED, caught.value
            assert TTFT_REJECTION.fullmatch(caught.value.details), caught.value.details
            with pytest.raises(baton.BatonError) as caught:  # a stream fails before any chunk
                next(iter(client.generate(token_ids=ADMISSION_PROMPT, max_tokens=2)))
            assert caught.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED, caught.value
            # Validation comes first: a bad request is still INVALID_ARGUMENT.
            with pytest.raises(baton.BatonError) as caught:
                client.complete(token_ids=ADMISSION_PROMPT, max_tokens=0)
            assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT, caught.value
            for stream in (False, True):
                status, body = post_completion(deployment.http_port, {
                    "prompt": ADMISSION_PROMPT, "max_tokens": 2, "stream": stream})
                assert status == 429, (stream, body)
                assert body["error"]["code"] == 429 and body["error"]["type"] == "rate_limit_error", body
                assert TTFT_REJECTION.fullmatch(body["error"]["message"]), body
            assert client.health().status == "SERVING"
        # Shedding left nothing behind on the workers.
        idle, stats = wait_for_idle_workers(deployment, 5.0)
        assert idle, stats

    def test_tpot_slo_sheds_load_once_decode_is_observed(self, fresh_deployments):
        deployment = fresh_deployments.start("slo-tpot", mode="colocated", slo={"tpot_ms": 0.001})
        with deployment.client() as client:
            first = client.complete(prompt="hello", max_tokens=4, ignore_eos=True)
            assert first.num_generated_tokens == 4
            with pytest.raises(baton.BatonError) as caught:
                client.complete(prompt="hello", max_tokens=4)
            assert caught.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED, caught.value
            assert re.fullmatch(
                r"predicted TPOT \S+ ms exceeds the 0\.001 ms SLO on every decode instance \(lowest: "
                r"colocated worker 0 at batch 1, step \S+ ms \+ 0 ms per request\); retry later",
                caught.value.details), caught.value.details

    @pytest.mark.parametrize("slo", [
        pytest.param({"ttft_ms": 0.001, "tpot_ms": 0.001, "admission": False}, id="admission-off"),
        pytest.param({"ttft_ms": 60000, "tpot_ms": 60000}, id="relaxed-slo"),
    ])
    def test_server_keeps_serving(self, fresh_deployments, slo):
        deployment = fresh_deployments.start("slo-serve", mode="colocated", slo=slo)
        with deployment.client() as client:
            for _ in range(3):
                result = client.complete(token_ids=ADMISSION_PROMPT, max_tokens=4, ignore_eos=True)
                assert result.num_generated_tokens == 4
