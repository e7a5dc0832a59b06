"""Prefix caching served end to end (issue 38): real `baton serve` deployments on loopback.

  * A 4-turn conversation, disaggregated: every follow-up's prefill takes the earlier turns from the
    prefill worker's cache (usage's cached tokens), the decode worker pulls only the blocks its own
    cache does not hold (the bytes counted by baton:kv_transfer_bytes), and every answer is the one
    a deployment without prefix caching gives.
  * Conditional disaggregation: below max_local_prefill_tokens of uncached context the decode worker
    prefills the request itself (no hand-off), above it a prefill worker does; the tokens are the
    same either way.
  * A decode worker holding cached prefixes is killed mid-stream: the request completes with the
    fault-free tokens (token replay onto the restarted worker, which starts with an empty cache).
"""

from __future__ import annotations

import json
import signal
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from serving_fixtures import assert_same_run_up_to_rounding, random_ids, wait_until

BLOCK_SIZE = 16  # the deployments' default
ANSWER_TOKENS = 8
HEARTBEAT_S = 0.2  # runtime/rpc/worker_server.h: cache events reach the scheduler on heartbeats


def metric_sum(http_port: int, family: str, sample: str, **labels) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=30) as response:
        text = response.read().decode()
    total = 0.0
    for parsed in text_string_to_metric_families(text):
        for s in parsed.samples:
            if parsed.name == family and s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


def conversation_turns(num_turns: int, first_len: int, message_len: int, complete) -> list[tuple[list[int], object]]:
    """Turn n+1's prompt is turn n's prompt, its answer and a new message; [(prompt, completion)]."""
    turns = []
    prompt = random_ids(first_len, seed=380)
    for turn in range(num_turns):
        completion = complete(prompt)
        turns.append((prompt, completion))
        prompt = prompt + list(completion.token_ids) + random_ids(message_len, seed=381 + turn)
    return turns


@pytest.mark.engine
def test_a_four_turn_conversation_pulls_only_its_new_blocks(fresh_deployments):
    cached = fresh_deployments.start("prefix-on", http=True)
    uncached = fresh_deployments.start("prefix-off", config={"enable_prefix_caching": False})
    bytes_pulled = []
    with cached.client() as client:
        def complete(prompt):
            before = metric_sum(cached.http_port, "baton:kv_transfer_bytes", "baton:kv_transfer_bytes_sum")
            completion = client.complete(token_ids=prompt, max_tokens=ANSWER_TOKENS, ignore_eos=True)
            bytes_pulled.append(metric_sum(cached.http_port, "baton:kv_transfer_bytes",
                                           "baton:kv_transfer_bytes_sum") - before)
            time.sleep(3 * HEARTBEAT_S)  # the scheduler's index takes in the workers' cache events
            return completion

        turns = conversation_turns(4, 60, 20, complete)
    with uncached.client() as client:
        for n, (prompt, completion) in enumerate(turns):
            reference = client.complete(token_ids=prompt, max_tokens=ANSWER_TOKENS, ignore_eos=True)
            assert list(completion.token_ids) == list(reference.token_ids), f"turn {n}"
            assert reference.num_cached_tokens == 0

    # Turn 1 pulls all of its KV: ceil(60 / 16) = 4 blocks.
    block_bytes = bytes_pulled[0] / 4
    assert block_bytes > 0 and block_bytes == int(block_bytes)
    for n in range(1, 4):
        prompt, completion = turns[n]
        previous_prompt = turns[n - 1][0]
        # The prefill worker cached the full blocks of the previous prompt.
        assert completion.num_cached_tokens == len(previous_prompt) // BLOCK_SIZE * BLOCK_SIZE, f"turn {n}"
        # The decode worker cached those of the previous prompt and answer but the last token, whose
        # KV it never computed; the new turn's KV is its prompt.
        held = (len(previous_prompt) + ANSWER_TOKENS - 1) // BLOCK_SIZE
        needed = -(-len(prompt) // BLOCK_SIZE)
        assert bytes_pulled[n] == (needed - held) * block_bytes, \
            f"turn {n}: pulled {bytes_pulled[n] / block_bytes} blocks, expected {needed - held} of {needed}"
    # The hits show in the instances' counters too (as their next heartbeats report them).
    hits = sum(c.num_cached_tokens for _, c in turns)
    assert wait_until(lambda: metric_sum(cached.http_port, "baton:prefix_cache_hits", "baton:prefix_cache_hits_total",
                                         role="prefill") == hits, 5), hits
    assert metric_sum(cached.http_port, "baton:prompt_tokens_cached", "baton:prompt_tokens_cached_total") == \
        sum(c.num_cached_tokens for _, c in turns)


@pytest.mark.engine
def test_conditional_disaggregation_prefills_short_remainders_on_the_decode_worker(fresh_deployments):
    threshold = 32
    deployment = fresh_deployments.start("conditional", http=True,
                                         config={"max_local_prefill_tokens": threshold})
    reference = fresh_deployments.start("conditional-ref", config={"enable_prefix_caching": False})

    def paths():
        return {path: metric_sum(deployment.http_port, "baton:conditional_disagg_decisions",
                                 "baton:conditional_disagg_decisions_total", path=path)
                for path in ("local", "remote")}

    def transferred():
        return metric_sum(deployment.http_port, "baton:kv_transfer_bytes", "baton:kv_transfer_bytes_count")

    with deployment.client() as client, reference.client() as ref:
        def check(prompt, want_path):
            before, moved = paths(), transferred()
            got = client.complete(token_ids=prompt, max_tokens=ANSWER_TOKENS, ignore_eos=True)
            after = paths()
            assert after[want_path] == before[want_path] + 1, (want_path, before, after)
            assert (transferred() > moved) == (want_path == "remote")
            want = ref.complete(token_ids=prompt, max_tokens=ANSWER_TOKENS, ignore_eos=True)
            assert list(got.token_ids) == list(want.token_ids), want_path
            time.sleep(3 * HEARTBEAT_S)
            return got

        check(random_ids(threshold, seed=1), "local")  # short: nothing to hand off for
        long_prompt = random_ids(100, seed=2)
        first = check(long_prompt, "remote")
        # The decode worker now holds the long prompt and its answer: a follow-up leaves 22 tokens.
        follow_up = long_prompt + list(first.token_ids) + random_ids(10, seed=3)
        second = check(follow_up, "local")
        assert second.num_cached_tokens == (len(long_prompt) + ANSWER_TOKENS - 1) // BLOCK_SIZE * BLOCK_SIZE
        check(follow_up + random_ids(3 * threshold, seed=4), "remote")


@pytest.mark.engine
def test_a_killed_decode_worker_with_cached_prefixes_loses_no_request(fresh_deployments):
    deployment = fresh_deployments.start("prefix-kill")
    prefix = random_ids(96, seed=7)
    with deployment.client(timeout=120) as client:
        client.complete(token_ids=prefix + random_ids(5, seed=8), max_tokens=4, ignore_eos=True)
        request = {"token_ids": prefix + random_ids(7, seed=9), "max_tokens": 160, "ignore_eos": True}
        fault_free = list(client.complete(**request).token_ids)
        streamed = []
        with client.generate(**request) as stream:
            for chunk in stream:
                streamed += chunk.token_ids
                if len(streamed) >= 20 and deployment.pids["decode worker 0"]:
                    deployment.kill("decode worker 0", signal.SIGKILL)
                    deployment.pids["decode worker 0"] = 0  # killed once
        assert deployment.restarted_pid("decode worker 0", restart=1, timeout=60) is not None, deployment.log()
        assert len(streamed) == request["max_tokens"]
        assert_same_run_up_to_rounding(client, request, streamed, fault_free, "killed decode worker")
