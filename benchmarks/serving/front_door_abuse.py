#!/usr/bin/env python3
"""What other clients see while the HTTP front door is abused (issue 37).

Starts `baton serve` (1 prefill + 1 decode, OpenAI HTTP on), then measures the latency of 2-token
completions from a well-behaved client in rounds, interleaved so that every condition sees the same
machine state:
  - baseline: nobody else;
  - slowloris: N connections (default 5000, from 10 loopback addresses) that trickle a request in,
    a byte every 2 s each, reconnecting whenever the server closes them;
  - readers: M streams (default 40) of long completions that their clients read: the batch load
    the next condition would be without pausing;
  - slow readers: the same M streams, but their clients never read.
Both stream conditions measure after --settle seconds (default 35): by then a stream nobody reads
has backed up to the worker and been paused (out of the decode batch), while one that is read still
decodes. Prints one JSON object: p50/p99 of each condition, and the scheduler's threads and RSS.

  .venv/bin/python benchmarks/serving/front_door_abuse.py --model build/models/tiny
"""
import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from scheduler_overhead import free_port_block  # this folder's


def completion_seconds(port):
    body = json.dumps({"prompt": "Hello", "max_tokens": 2, "temperature": 0}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
            ok = response.status == 200
    except OSError:
        ok = False
    return time.perf_counter() - start if ok else float("inf")


class Slowloris:
    """n connections that trickle a request's headers in and come back when closed."""

    HEAD = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"

    def __init__(self, port, n):
        self.port, self.n = port, n
        self.socks = [None] * n
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _connect(self, i):
        try:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=5,
                                         source_address=(f"127.0.0.{2 + i % 10}", 0))
            s.sendall(self.HEAD)
            return s
        except OSError:
            return None

    def _run(self):
        for i in range(self.n):
            self.socks[i] = self._connect(i)
        while not self.stop.wait(2.0):
            for i, s in enumerate(self.socks):
                try:
                    if s is None:
                        raise OSError
                    s.send(b"X")
                except OSError:
                    if s is not None:
                        s.close()
                    self.socks[i] = self._connect(i)

    def start(self):
        self.thread.start()
        while sum(s is not None for s in self.socks) < self.n * 0.95 and self.thread.is_alive():
            time.sleep(0.1)

    def close(self):
        self.stop.set()
        self.thread.join(60)
        for s in self.socks:
            if s is not None:
                s.close()


class Streams:
    """m streaming 1,500-token completions, read to the end by their clients or never read."""

    def __init__(self, port, m, read, settle):
        body = json.dumps({"prompt": "Once", "max_tokens": 1500, "ignore_eos": True, "stream": True}).encode()
        self.request = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        self.port, self.m, self.read, self.settle, self.socks = port, m, read, settle, []

    def _drain(self, s):
        try:
            while s.recv(65536):
                pass
        except OSError:
            pass

    def start(self):
        for _ in range(self.m):
            s = socket.create_connection(("127.0.0.1", self.port), timeout=120)
            if not self.read:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(self.request)
            self.socks.append(s)
            if self.read:
                threading.Thread(target=self._drain, args=(s,), daemon=True).start()
        time.sleep(self.settle)

    def close(self):
        for s in self.socks:
            s.close()


def proc_status(pid):
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return int(fields["Threads"]), int(fields["VmRSS"].split()[0]) / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--baton", default=os.path.join(os.environ.get("BATON_BUILD_DIR", "build"), "bin", "baton"))
    ap.add_argument("--slowloris", type=int, default=5000)
    ap.add_argument("--slow-readers", type=int, default=40)
    ap.add_argument("--requests", type=int, default=40, help="per condition and round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--settle", type=float, default=35.0, help="seconds between opening streams and measuring")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    base = free_port_block(4)
    config = f"""model: {os.path.abspath(args.model)}
scheduler_port: {base}
http_port: {base + 3}
internal_port: {base + 4}
prefill: {{instances: 1, base_port: {base + 1}, threads: 1}}
decode: {{instances: 1, base_port: {base + 2}, threads: 1, max_num_seqs: 64}}
"""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(config)
    proc = subprocess.Popen([args.baton, "serve", "--config", f.name], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:
            if line.startswith("baton: serving"):
                break
        else:
            sys.exit("baton serve did not start")
        threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
        scheduler_pid = None
        for line in proc.stderr:
            if line.startswith("baton: started scheduler (pid "):
                scheduler_pid = int(line.split("pid ")[1].rstrip(")\n"))
                break
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
        port = base + 3
        completion_seconds(port)  # warm-up
        conditions = {
            "baseline": lambda: None,
            f"slowloris_{args.slowloris}": lambda: Slowloris(port, args.slowloris),
            f"streams_read_{args.slow_readers}": lambda: Streams(port, args.slow_readers, True, args.settle),
            f"streams_unread_{args.slow_readers}": lambda: Streams(port, args.slow_readers, False, args.settle),
        }
        latencies = {name: [] for name in conditions}
        peaks = {name: (0, 0.0) for name in conditions}
        for _ in range(args.rounds):
            for name, make in conditions.items():
                abuse = make()
                if abuse is not None:
                    abuse.start()
                for _ in range(args.requests):
                    latencies[name].append(completion_seconds(port))
                threads, rss = proc_status(scheduler_pid)
                peaks[name] = (max(peaks[name][0], threads), max(peaks[name][1], rss))
                if abuse is not None:
                    abuse.close()
                time.sleep(1)
        out = {"model": args.model, "requests_per_condition": args.requests * args.rounds}
        for name, xs in latencies.items():
            xs.sort()
            out[name] = {"p50_ms": round(statistics.median(xs) * 1e3, 1),
                         "p99_ms": round(xs[min(len(xs) - 1, int(0.99 * len(xs)))] * 1e3, 1),
                         "failed": sum(x == float("inf") for x in xs),
                         "scheduler_threads": peaks[name][0],
                         "scheduler_rss_mib": round(peaks[name][1])}
        print(json.dumps(out, indent=1))
    finally:
        proc.terminate()
        proc.wait(60)
        os.unlink(f.name)


if __name__ == "__main__":
    main()
