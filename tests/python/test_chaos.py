"""Chaos: a 2 prefill + 2 decode deployment serves an open stream of seeded requests while a decode
worker is killed (SIGKILL), then a prefill worker, then the other decode worker is frozen (SIGSTOP),
and clients cancel a share of the requests at random moments. `baton serve` restarts each worker
(the frozen one once the scheduler has cut it off). Then:
  - every request not cancelled completes with all its tokens and no error, and its stream is what a
    fault-free run of the same request samples, up to rounding (assert_same_run_up_to_rounding:
    greedy and seeded at temperature 1);
  - a cancelled request ends CANCELLED (or had finished before its cancel arrived);
  - every worker, restarted ones included, ends with no KV block, request or prefill work left.
The faults are spaced by the restarts (the next comes once the last victim is back), so the run is
the same sequence of events on a fast or a slow machine; the requests keep coming until the last
fault has been survived.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

import baton
from serving_fixtures import assert_same_run_up_to_rounding, random_ids, wait_for_idle_workers, wait_until

SEED = 20261125
CONCURRENCY = 6
MIN_REQUESTS = 24  # at least this many, and on until every fault is past
CANCEL_SHARE = 0.25
# Each victim is hit while it serves requests: a decode worker once it runs some, a prefill worker
# frozen for half a second first (the stream routes prompts to it meanwhile: it answers nothing, so
# they are certainly in flight there when it dies; its heartbeats are not missed for that long).
FAULTS = (("decode worker 0", signal.SIGKILL), ("prefill worker 0", signal.SIGKILL),
          ("decode worker 1", signal.SIGSTOP))
PREFILL_FREEZE_S = 0.5
RESTART_TIMEOUT_S = 30.0  # a fault's victim is back within this (cut-off, backoff, model load)
IDLE_TIMEOUT_S = 5.0


def make_request(rng: random.Random, i: int) -> dict:
    request = dict(token_ids=random_ids(rng.randint(4, 160), seed=9000 + i),
                   max_tokens=rng.randint(30, 160), ignore_eos=True)
    if i % 2:
        request.update(temperature=1.0, seed=rng.randint(0, 2**31))
    return request


class Client:
    """One simulated client: sends request i and, if it is to cancel, cancels after a number of
    tokens or a random delay (possibly before the first token: while queued, prefilling or handed
    off)."""

    def __init__(self, client: baton.Client, request: dict, cancel: tuple[str, float] | None):
        self.request, self.cancel = request, cancel
        self.tokens: list[int] = []
        self.error: baton.BatonError | None = None
        stream = client.generate(**request)
        timer = None
        if cancel is not None and cancel[0] == "after_s":
            timer = threading.Timer(cancel[1], stream.cancel)
            timer.start()
        try:
            for chunk in stream:
                self.tokens += chunk.token_ids
                if cancel is not None and cancel[0] == "after_tokens" and len(self.tokens) >= cancel[1]:
                    stream.cancel()
        except baton.BatonError as error:
            self.error = error
        finally:
            if timer is not None:
                timer.cancel()


@pytest.mark.engine
def test_chaos_no_request_lost(fresh_deployments):
    rng = random.Random(SEED)
    deployment = fresh_deployments.start("chaos", num_prefill=2, num_decode=2)
    runs: list[Client] = []
    faults_done = threading.Event()
    lock = threading.Lock()
    next_index = 0

    with deployment.client(timeout=180) as client:
        def serve_one() -> bool:
            nonlocal next_index
            with lock:
                if next_index >= MIN_REQUESTS and faults_done.is_set():
                    return False
                i = next_index
                next_index += 1
                request = make_request(rng, i)
                cancel = None
                if rng.random() < CANCEL_SHARE:
                    cancel = (("after_s", rng.uniform(0.0, 0.3)) if rng.random() < 0.5
                              else ("after_tokens", rng.randint(1, request["max_tokens"] - 1)))
            run = Client(client, request, cancel)
            with lock:
                runs.append(run)
            return True

        def client_loop():
            while serve_one():
                pass

        with ThreadPoolExecutor(CONCURRENCY) as pool:
            loops = [pool.submit(client_loop) for _ in range(CONCURRENCY)]
            assert wait_until(lambda: len(runs) >= 2, 60), "no request completed"
            for victim, sig in FAULTS:
                old_pid = deployment.pids[victim]
                if victim.startswith("decode"):
                    assert wait_until(lambda: deployment.worker_stats_of(victim).num_requests_running > 0,
                                      30), f"{victim} never ran a request"
                else:
                    deployment.kill(victim, signal.SIGSTOP)
                    time.sleep(PREFILL_FREEZE_S)
                deployment.kill(victim, sig)
                new_pid = deployment.restarted_pid(victim, restart=1, timeout=RESTART_TIMEOUT_S)
                assert new_pid is not None and new_pid != old_pid, \
                    f"{victim} was not restarted\n{deployment.log()}"
                # Let the restarted worker take requests before the next fault.
                time.sleep(0.5)
            faults_done.set()
            for loop in loops:
                loop.result(timeout=300)

        assert len(runs) >= MIN_REQUESTS
        cancelled = [r for r in runs if r.cancel is not None]
        kept = [r for r in runs if r.cancel is None]
        assert kept and cancelled
        for i, run in enumerate(kept):
            assert run.error is None, f"request {i} ({run.request.get('seed')}) failed: {run.error}"
            assert len(run.tokens) == run.request["max_tokens"], f"request {i}"
        for run in cancelled:
            if run.error is not None:
                assert run.error.code == grpc.StatusCode.CANCELLED, run.error
            else:  # finished before its cancel took effect
                assert len(run.tokens) == run.request["max_tokens"]

        # The same requests, fault-free now, sample the same tokens (up to rounding).
        with ThreadPoolExecutor(CONCURRENCY) as pool:
            again = list(pool.map(lambda r: list(client.complete(**r.request).token_ids), kept))
        for i, (run, fault_free) in enumerate(zip(kept, again)):
            assert_same_run_up_to_rounding(client, run.request, run.tokens, fault_free, f"request {i}")

        assert wait_until(lambda: client.health().status == "SERVING", 10), client.health()
    idle, stats = wait_for_idle_workers(deployment, IDLE_TIMEOUT_S)
    assert idle, f"workers hold KV or work after the run: {stats}"
    for victim, _ in FAULTS:
        assert deployment.stderr.wait_for(rf"^baton: restarted {victim} \(pid \d+, restart 1\)$", 0)
