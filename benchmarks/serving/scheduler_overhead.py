#!/usr/bin/env python3
"""What the global scheduler adds to latency, and how many streams it sustains.

Starts `baton serve` with one colocated worker, then, at low load (one request at a time), measures
TTFT and TPOT of the same greedy requests (1) through the scheduler's public Generate API and
(2) straight to the worker's WorkerService.Decode, interleaved so both see the same machine state.
Then opens N concurrent streams through the scheduler and reports how many complete and the
aggregate token rate. Prints one JSON object.

  .venv/bin/python benchmarks/serving/scheduler_overhead.py --model build/models/tiny
"""
import argparse
import concurrent.futures
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import grpc

from baton.v1 import inference_pb2, inference_pb2_grpc, worker_pb2, worker_pb2_grpc


def free_port_block(n):
    """A base port with n consecutive free ports after it."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n >= 65000:
            continue
        ok = True
        for p in range(base, base + n):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port block")


def timed_stream(responses):
    """(ttft_s, [gaps_s]) from a stream of messages each carrying >= 1 token."""
    start = time.perf_counter()
    times = []
    for r in responses:
        now = time.perf_counter()
        n = len(r.token_ids) if hasattr(r, "token_ids") else len(r.tokens.token_ids)
        times.extend([now] * n)
    return times[0] - start, [b - a for a, b in zip(times, times[1:])]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--baton", default=os.path.join(os.environ.get("BATON_BUILD_DIR", "build"), "bin", "baton"))
    ap.add_argument("--requests", type=int, default=30)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--streams", type=int, default=64)
    args = ap.parse_args()

    base = free_port_block(3)
    config = f"""model: {os.path.abspath(args.model)}
mode: colocated
scheduler_port: {base}
http_port: 0
internal_port: {base + 2}
colocated: {{instances: 1, base_port: {base + 1}, threads: 1, max_num_seqs: 128}}
"""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(config)
    # The deployment secret, so that this script may call the worker's internal API directly.
    secret = os.urandom(32).hex()
    secret_file = f.name + ".secret"
    with os.fdopen(os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
        out.write(secret + "\n")
    proc = subprocess.Popen([args.baton, "serve", "--config", f.name, "--secret-file", secret_file],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        for line in proc.stdout:
            if line.startswith("baton: serving"):
                break
        else:
            sys.exit("baton serve did not start")
        # Keep draining the launcher's output so that it never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
        sched = inference_pb2_grpc.InferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{base}"))
        worker = worker_pb2_grpc.WorkerServiceStub(grpc.insecure_channel(f"127.0.0.1:{base + 1}"))
        prompt = [(i * 7919) % 30000 + 2 for i in range(args.prompt_len)]

        def via_scheduler(i):
            req = inference_pb2.GenerateRequest(token_ids=inference_pb2.TokenIds(ids=prompt))
            req.stop.max_tokens = args.max_tokens
            req.stop.ignore_eos = True
            return timed_stream(sched.Generate(req, timeout=120))

        def direct(i):
            req = worker_pb2.DecodeRequest(request_id=f"direct-{i}-{time.time_ns()}", prompt_token_ids=prompt)
            req.stop.max_tokens = args.max_tokens
            req.stop.ignore_eos = True
            events = worker.Decode(req, timeout=120, metadata=[("x-baton-deployment-secret", secret)])
            return timed_stream(m for m in events if m.HasField("tokens"))

        via_scheduler(-1), direct(-1)  # warm-up
        rows = {"scheduler": [], "direct": []}
        for i in range(args.requests):
            rows["scheduler"].append(via_scheduler(i))
            rows["direct"].append(direct(i))

        def p50(xs):
            return statistics.median(xs) * 1e3

        out = {"model": args.model, "requests": args.requests, "prompt_len": args.prompt_len,
               "max_tokens": args.max_tokens}
        for name, rs in rows.items():
            out[f"{name}_ttft_p50_ms"] = p50([r[0] for r in rs])
            out[f"{name}_tpot_p50_ms"] = p50([statistics.mean(r[1]) for r in rs])
        out["added_ttft_p50_ms"] = out["scheduler_ttft_p50_ms"] - out["direct_ttft_p50_ms"]
        out["added_tpot_p50_ms"] = out["scheduler_tpot_p50_ms"] - out["direct_tpot_p50_ms"]

        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(args.streams) as pool:
            results = list(pool.map(lambda i: _safe(via_scheduler, i), range(args.streams)))
        elapsed = time.perf_counter() - start
        done = [r for r in results if r is not None]
        out["concurrent_streams"] = args.streams
        out["concurrent_completed"] = len(done)
        out["concurrent_tokens_per_s"] = len(done) * args.max_tokens / elapsed
        print(json.dumps(out, indent=1))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        os.unlink(f.name)


def _safe(fn, i):
    try:
        return fn(i)
    except grpc.RpcError:
        return None


if __name__ == "__main__":
    main()
