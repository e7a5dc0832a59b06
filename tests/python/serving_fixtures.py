"""Real `baton serve` deployments on loopback for the serving tests, and the local greedy references.

A Deployment is one `baton serve --config FILE` process (the launcher) with its children: the
scheduler on a free port P, the workers on P+1, P+2, ... (prefill or colocated instances first, then
decode). Deployment.stop() sends SIGTERM to the launcher, then SIGKILL (to the launcher and to every
child's process group) if it does not exit within its deadline, and returns the problems it found:
processes still alive, /dev/shm/baton-kv-<pid>-* segments named after one of its processes, the
launcher's temporary config file. Leftover segments are removed after being reported, so that a
failure does not leak memory into later runs. Every wait here has a deadline.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import grpc
import numpy as np

import baton
from baton.v1 import worker_pb2, worker_pb2_grpc

SHM_DIR = Path("/dev/shm")
STARTUP_TIMEOUT_S = 120.0  # a loaded 2-core machine loads 4 workers' weights slowly
STOP_TIMEOUT_S = 20.0
STOP_GRACE_S = 5  # the launcher's --stop-grace: SIGTERM to SIGKILL of a child
STATS_RPC_TIMEOUT_S = 10.0  # a deadline: a busy 2-core CI machine answered one GetStats in over 2 s
# Ports below Linux's ephemeral range (32768-60999), which outgoing connections draw from.
PORT_RANGE = (20000, 32000)

_EFFECTIVE_CONFIG = re.compile(r"^baton: effective config in (\S+)$")


def port_block_is_free(base: int, count: int) -> bool:
    for port in range(base, base + count):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def pick_port_block(count: int, rng: random.Random) -> int:
    """The first port of `count` consecutive free loopback ports."""
    for _ in range(200):
        base = rng.randrange(PORT_RANGE[0], PORT_RANGE[1] - count)
        if port_block_is_free(base, count):
            return base
    raise RuntimeError(f"no {count} consecutive free ports in {PORT_RANGE}")


def process_alive(pid: int) -> bool:
    """True if `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def processes_with_arg(arg: str) -> list[int]:
    """Live processes with `arg` on their command line."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                args = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if arg.encode() in args and process_alive(int(proc.name)):
                pids.append(int(proc.name))
    return pids


def kv_segments_of(pids) -> list[Path]:
    """The /dev/shm/baton-kv-<pid>-<index> segments named after one of `pids`."""
    prefixes = tuple(f"baton-kv-{pid}-" for pid in pids)
    return sorted(p for p in SHM_DIR.glob("baton-kv-*") if p.name.startswith(prefixes))


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


class LineCollector:
    """Reads a pipe line by line on a thread; wait_for() blocks (with a deadline) for a matching
    line."""

    def __init__(self, pipe):
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, args=(pipe,), daemon=True)
        self._thread.start()

    def _run(self, pipe) -> None:
        for line in pipe:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def wait_for(self, pattern: re.Pattern | str, timeout: float,
                 alive: Callable[[], bool] = lambda: True) -> re.Match | None:
        """The first line matching `pattern`, waiting up to `timeout` seconds while alive()."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines:
                    if match := regex.search(line):
                        return match
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closed or not alive():
                    return None
                self._cond.wait(min(remaining, 0.1))

    def closed(self, timeout: float) -> bool:
        """True once every writer of the pipe has closed it (waits up to `timeout`)."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def text(self) -> str:
        with self._cond:
            return "\n".join(self.lines)


SECRET_METADATA = "x-baton-deployment-secret"  # runtime/rpc/internal_auth.h


class SecretInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Adds the deployment secret to every call, as the scheduler does on the internal APIs."""

    def __init__(self, secret: str):
        self.secret = secret

    def _with_secret(self, details):
        metadata = list(details.metadata or []) + [(SECRET_METADATA, self.secret)]
        return details._replace(metadata=metadata)

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._with_secret(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._with_secret(details), request)


def write_secret_file(path: Path) -> str:
    """A fresh deployment secret in a file only this user can read; returns the secret."""
    secret = os.urandom(32).hex()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")
    return secret


@dataclass
class Deployment:
    name: str
    launcher: subprocess.Popen
    scheduler_port: int
    worker_ports: dict[str, int]  # "prefill worker 0" -> port of its WorkerService
    secret: str  # the deployment secret the test handed `baton serve` (--secret-file)
    stdout: LineCollector
    stderr: LineCollector
    secret_file: Path | None = None  # None: the launcher generated the secret
    internal_port: int = 0  # the scheduler's worker registry
    pids: dict[str, int] = field(default_factory=dict)  # "scheduler", "decode worker 1", ... -> pid
    http_port: int = 0  # the OpenAI-compatible HTTP front end; 0: off
    effective_config: Path | None = None
    stopped: bool = False
    _channels: list[grpc.Channel] = field(default_factory=list)
    _stubs: dict[str, worker_pb2_grpc.WorkerServiceStub] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.scheduler_port}"

    def client(self, timeout: float = 60.0) -> baton.Client:
        return baton.Client(self.address, timeout=timeout)

    def worker_stub(self, worker: str) -> worker_pb2_grpc.WorkerServiceStub:
        """A stub of the worker's internal API whose calls carry the deployment secret."""
        if worker not in self._stubs:
            channel = grpc.insecure_channel(f"127.0.0.1:{self.worker_ports[worker]}")
            self._channels.append(channel)
            authed = grpc.intercept_channel(channel, SecretInterceptor(self.secret))
            self._stubs[worker] = worker_pb2_grpc.WorkerServiceStub(authed)
        return self._stubs[worker]

    def list_workers(self) -> dict[str, worker_pb2.ListWorkersResponse.Worker]:
        """The scheduler's registry (ListWorkers on its internal port), by worker name."""
        channel = grpc.insecure_channel(f"127.0.0.1:{self.internal_port}")
        self._channels.append(channel)
        stub = worker_pb2_grpc.WorkerRegistryServiceStub(
            grpc.intercept_channel(channel, SecretInterceptor(self.secret)))
        roles = {worker_pb2.WORKER_ROLE_PREFILL: "prefill", worker_pb2.WORKER_ROLE_DECODE: "decode",
                 worker_pb2.WORKER_ROLE_COLOCATED: "colocated"}
        response = stub.ListWorkers(worker_pb2.ListWorkersRequest(), timeout=STATS_RPC_TIMEOUT_S)
        return {f"{roles[w.role]} worker {w.instance_idx}": w for w in response.workers}

    def worker_stats(self) -> dict[str, worker_pb2.WorkerStats]:
        """GetStats of every live worker, by name."""
        stats = {}
        for worker in self.worker_ports:
            if process_alive(self.pids[worker]):
                stats[worker] = self.worker_stats_of(worker)
        return stats

    def worker_stats_of(self, worker: str) -> worker_pb2.WorkerStats:
        return self.worker_stub(worker).GetStats(worker_pb2.GetStatsRequest(), timeout=STATS_RPC_TIMEOUT_S)

    def kill(self, worker: str, sig: int = signal.SIGKILL) -> None:
        os.kill(self.pids[worker], sig)

    def restarted_pid(self, worker: str, restart: int, timeout: float) -> int | None:
        """The pid of the launcher's restart number `restart` of `worker`, once it logged it (then
        pids[worker] is that pid and teardown checks it too); None if not within `timeout`."""
        line = self.stderr.wait_for(rf"^baton: restarted {re.escape(worker)} \(pid (\d+), restart {restart}\)$",
                                    timeout)
        if line is None:
            return None
        self.pids[worker] = int(line.group(1))
        return self.pids[worker]

    def log(self) -> str:
        return f"--- stdout\n{self.stdout.text()}\n--- stderr\n{self.stderr.text()}"

    def stop(self) -> list[str]:
        """Stops the deployment (SIGTERM, then SIGKILL after the deadline); returns the problems."""
        if self.stopped:
            return []
        self.stopped = True
        for channel in self._channels:
            channel.close()
        problems = []
        if self.launcher.poll() is None:
            self.launcher.send_signal(signal.SIGTERM)
        try:
            code = self.launcher.wait(STOP_TIMEOUT_S)
            if code != 0:
                problems.append(f"{self.name}: the launcher exited with {code} after SIGTERM")
        except subprocess.TimeoutExpired:
            problems.append(f"{self.name}: the launcher did not stop within {STOP_TIMEOUT_S} s of SIGTERM")
            self.launcher.kill()
            self.launcher.wait(STOP_TIMEOUT_S)
        survivors = {n: pid for n, pid in self.pids.items()
                     if not wait_until(lambda pid=pid: not process_alive(pid), 5.0)}
        if self.effective_config is not None:  # children the launcher did not log
            survivors.update((f"pid {pid}", pid) for pid in processes_with_arg(str(self.effective_config)))
        if survivors:
            problems.append(f"{self.name}: orphan processes after teardown: {sorted(survivors)}")
            for pid in survivors.values():
                for kill in (os.killpg, os.kill):  # its process group (the supervisor makes one), then it
                    try:
                        kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
        if not self.stdout.closed(5.0) or not self.stderr.closed(5.0):
            problems.append(f"{self.name}: a process still holds the launcher's output pipes")
        leftovers = kv_segments_of([self.launcher.pid, *self.pids.values()])
        if leftovers:
            problems.append(f"{self.name}: leftover KV segments {[p.name for p in leftovers]}")
            for segment in leftovers:
                segment.unlink(missing_ok=True)
        if self.effective_config is not None and self.effective_config.exists():
            problems.append(f"{self.name}: the launcher left its config {self.effective_config}")
        return problems


class DeploymentFactory:
    """start(...) -> a running Deployment; stop_all() stops every one and returns the problems."""

    def __init__(self, binary: Path, model_dir: Path, work_dir: Path):
        self.binary = binary
        self.model_dir = model_dir
        self.work_dir = work_dir
        self.deployments: list[Deployment] = []
        self._last_failure = ""
        self._rng = random.Random(os.getpid() ^ time.time_ns())

    def start(self, name: str, mode: str = "disaggregated", num_prefill: int = 1,
              num_decode: int = 1, num_colocated: int = 1, prefill: dict | None = None,
              decode: dict | None = None, colocated: dict | None = None, slo: dict | None = None,
              http: bool = False, config: dict | None = None,
              serve_args: tuple[str, ...] = ()) -> Deployment:
        """Starts `baton serve` and waits (with a deadline) until it prints that it serves. The phase
        dicts add YAML keys to a phase (max_num_seqs, kv_cache_bytes, ...); `slo` is the config's slo
        section (ttft_ms, tpot_ms, admission, ...); `http` turns the OpenAI HTTP front end on, on the
        port after the workers' (Deployment.http_port). `config` adds top-level keys (tls_cert, ...);
        `serve_args` are more flags for `baton serve` (--api-key, ...)."""
        if mode == "disaggregated":
            phases = [("prefill", num_prefill, prefill or {}), ("decode", num_decode, decode or {})]
        else:
            phases = [("colocated", num_colocated, colocated or {})]
        num_workers = sum(count for _, count, _ in phases)
        last_error = ""
        for _ in range(3):  # another process may take a port between the probe and the bind
            # scheduler, workers, [http], internal (the registry)
            base = pick_port_block(2 + num_workers + int(http), self._rng)
            http_port = base + 1 + num_workers if http else 0
            text, worker_ports = self._config(mode, base, phases, http_port, slo, config)
            path = self.work_dir / f"{name}-{base}.yaml"
            path.write_text(text)
            internal_port = base + 1 + num_workers + int(http)  # as _config places it
            deployment = self._launch(name, path, base, worker_ports, internal_port, serve_args)
            if deployment is not None:
                deployment.http_port = http_port
                self.deployments.append(deployment)
                return deployment
            last_error = self._last_failure
        raise RuntimeError(f"{name}: `baton serve` did not start:\n{last_error}")

    def _config(self, mode: str, base: int, phases, http_port: int = 0,
                slo: dict | None = None, extra: dict | None = None) -> tuple[str, dict[str, int]]:
        num_workers = sum(count for _, count, _ in phases)
        internal_port = base + 1 + num_workers + int(http_port != 0)
        lines = [f"model: {self.model_dir}", "host: 127.0.0.1", f"scheduler_port: {base}",
                 f"http_port: {http_port}", f"internal_port: {internal_port}", f"mode: {mode}"]
        if slo is not None:
            lines.append(f"slo: {json.dumps(slo)}")  # JSON is YAML's flow style
        lines += [f"{key}: {json.dumps(value)}" for key, value in (extra or {}).items()]
        worker_ports = {}
        port = base + 1
        for phase, count, extra in phases:
            keys = {"instances": count, "base_port": port, "threads": 1, **extra}
            lines.append(f"{phase}: {{{', '.join(f'{k}: {v}' for k, v in keys.items())}}}")
            for i in range(count):
                worker_ports[f"{phase} worker {i}"] = port + i
            port += count
        return "\n".join(lines) + "\n", worker_ports

    def _launch(self, name: str, config: Path, base: int, worker_ports: dict[str, int],
                internal_port: int, serve_args: tuple[str, ...] = ()) -> Deployment | None:
        secret_file = config.with_suffix(".secret")
        secret = write_secret_file(secret_file)
        launcher = subprocess.Popen(
            [str(self.binary), "serve", "--config", str(config), "--stop-grace", str(STOP_GRACE_S),
             "--startup-timeout", str(int(STARTUP_TIMEOUT_S)), "--secret-file", str(secret_file),
             *serve_args],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        deployment = Deployment(name=name, launcher=launcher, scheduler_port=base,
                                worker_ports=worker_ports, secret=secret, secret_file=secret_file,
                                internal_port=internal_port, stdout=LineCollector(launcher.stdout),
                                stderr=LineCollector(launcher.stderr))
        ready = deployment.stdout.wait_for(r"^baton: serving ", STARTUP_TIMEOUT_S + 5,
                                           alive=lambda: launcher.poll() is None)
        # The launcher logs every child's pid (on stderr) before it waits for the scheduler's Health.
        for child in ["scheduler", *worker_ports]:
            started = deployment.stderr.wait_for(
                rf"^baton: started {re.escape(child)} \(pid (\d+)\)$", 5.0 if ready else 0.0)
            if started:
                deployment.pids[child] = int(started.group(1))
        if config_line := deployment.stderr.wait_for(_EFFECTIVE_CONFIG, 0.0):
            deployment.effective_config = Path(config_line.group(1))
        if ready is None:
            problems = deployment.stop()
            self._last_failure = deployment.log() + "\n" + "\n".join(problems)
            return None
        missing = [w for w in ["scheduler", *worker_ports] if w not in deployment.pids]
        if missing:
            deployment.stop()
            raise RuntimeError(f"{name}: the launcher did not log the pids of {missing}:\n{deployment.log()}")
        return deployment

    def stop_all(self) -> list[str]:
        problems = []
        for deployment in self.deployments:
            problems += deployment.stop()
        return problems


def wait_for_idle_workers(deployment: Deployment, timeout: float) -> tuple[bool, dict]:
    """Polls GetStats on every live worker until none holds a KV block, a request or outstanding
    prefill tokens. Returns (idle within timeout, the last stats as dicts)."""
    last = {}

    def idle() -> bool:
        nonlocal last
        stats = deployment.worker_stats()
        last = {name: {"num_kv_blocks_used": s.num_kv_blocks_used,
                       "num_requests_waiting": s.num_requests_waiting,
                       "num_requests_running": s.num_requests_running,
                       "num_requests_holding_kv": s.num_requests_holding_kv,
                       "num_prefill_tokens_outstanding": s.num_prefill_tokens_outstanding}
                for name, s in stats.items()}
        return all(not any(v.values()) for v in last.values())

    return wait_until(idle, timeout, interval=0.02), last


@dataclass(frozen=True)
class LocalRun:
    """`baton generate --model DIR --json` (in-process, greedy)."""

    prompt_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    text: str  # the concatenated "text" of the token lines
    finish_reason: str


def parse_generate_json(stdout: str) -> LocalRun:
    """Parses `baton generate --json` output: one object per token, then the summary."""
    lines = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    summary = lines[-1]
    return LocalRun(prompt_ids=tuple(summary["prompt_token_ids"]),
                    token_ids=tuple(line["token_id"] for line in lines[:-1]),
                    text="".join(line["text"] for line in lines[:-1]),
                    finish_reason=summary["finish_reason"])


def generate_args(prompt: str | None = None, token_ids=None, max_tokens: int = 16,
                  ignore_eos: bool = False) -> list[str]:
    """The prompt and stop flags shared by `baton generate` and `python -m baton generate`."""
    args = (["--prompt", prompt] if prompt is not None
            else ["--prompt-ids", ",".join(map(str, token_ids))])
    args += ["--max-tokens", str(max_tokens)]
    if ignore_eos:
        args.append("--ignore-eos")
    return args


# --- streams and what they may differ by ------------------------------------------------------


def random_ids(length: int, seed: int, vocab_size: int = 32000) -> list[int]:
    # 0 and 1 are BOS and EOS; everything else is an ordinary token.
    return [int(t) for t in np.random.default_rng(seed).integers(2, vocab_size, length)]




@dataclass
class StreamWatcher:
    """Iterates a baton.GenerateStream on a thread, recording chunks, the error and when it ended."""

    stream: baton.GenerateStream
    chunks: list = field(default_factory=list)
    error: baton.BatonError | None = None
    ended_at: float | None = None

    def __post_init__(self):
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            for chunk in self.stream:
                self.chunks.append(chunk)
        except baton.BatonError as error:
            self.error = error
        self.ended_at = time.monotonic()

    def num_tokens(self) -> int:
        return sum(len(c.token_ids) for c in self.chunks)

    def join(self, timeout: float) -> bool:
        self.thread.join(timeout)
        return not self.thread.is_alive()


def assert_same_run_up_to_rounding(client, request: dict, streamed: list[int], fault_free: list[int],
                                   what: str) -> None:
    """`streamed` is `fault_free`, or forks from it at a near-tie of two logits, and not by a lost or
    repeated token. A replayed request's prefill computes the KV of the streamed tokens with the
    prefill GEMM, the uninterrupted run with decode GEMVs; their sums round differently, and now and
    then that flips an argmax (a CI run on another CPU saw one, 99 tokens into a replayed stream).
    A lost or repeated token shows as the rest of the stream shifted by one against the fault-free
    run; a near-tie is a token the same context's next-token computation picks one way or the other."""
    fork = next((i for i, (a, b) in enumerate(zip(streamed, fault_free)) if a != b), len(fault_free))
    if fork == len(fault_free):
        return
    window = 8
    assert streamed[fork:fork + window] != fault_free[fork + 1:fork + 1 + window], \
        f"{what}: token {fork} of the fault-free run is missing from the stream"
    assert streamed[fork + 1:fork + 1 + window] != fault_free[fork:fork + window], \
        f"{what}: token {fork - 1} is streamed twice"
    if "temperature" not in request:  # greedy: check that the fork is a tie of these two tokens
        again = client.complete(token_ids=request["token_ids"] + streamed[:fork], max_tokens=1)
        assert list(again.token_ids)[0] in (streamed[fork], fault_free[fork]), \
            f"{what}: the stream forks from the fault-free run at token {fork} with a token neither picks"
