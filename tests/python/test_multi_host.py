"""A deployment over several hosts, for real: the scheduler, a prefill worker and two decode workers
each run in a network namespace of their own, with an address and a hostname of their own (so the
KV cache moves between "hosts" over TCP, not shared memory), joined by a bridge. Each process is
started by hand, as an operator would on separate machines: `baton scheduler --host` and `baton
worker --host/--advertise --scheduler` with the same config and secret file.

  * greedy output over the namespaces equals the one-host, in-process run;
  * cutting a decode worker's link (`ip link set down`) is a dead worker: the scheduler cuts it off
    within its heartbeat timeout and its streams finish on the other decode worker, none lost.

Needs root (CAP_NET_ADMIN) and iproute2; skips with the reason otherwise.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import baton
from serving_fixtures import (StreamWatcher, assert_same_run_up_to_rounding, generate_args,
                              parse_generate_json, random_ids, wait_until, write_secret_file)

STARTUP_TIMEOUT_S = 90
CUT_OFF_TIMEOUT_S = 10  # the registry's liveness timeout is ~2 s; a loaded CI machine is slower


class NetnsLab:
    """Network namespaces, one per "host", on a bridge in a namespace of its own; the test process
    (the root namespace) joins the bridge as the client host. Everything is removed by close()."""

    def __init__(self, tag: str, subnet: str):
        self.tag = tag
        self.subnet = subnet  # "10.231.7" -> hosts 10.231.7.N/24
        self.namespaces: list[str] = []
        self.processes: list[subprocess.Popen] = []
        self.switch = self._add_namespace("sw")
        self._ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        self._ip("-n", self.switch, "link", "set", "br0", "up")
        # The client's leg: in the root namespace, as the host the test runs on.
        self.client_if = f"btn{tag}c"
        self._ip("link", "add", self.client_if, "type", "veth", "peer", "name", "pc", "netns", self.switch)
        self._ip("-n", self.switch, "link", "set", "pc", "master", "br0", "up")
        self._ip("addr", "add", f"{subnet}.254/24", "dev", self.client_if)
        self._ip("link", "set", self.client_if, "up")

    @staticmethod
    def _ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=10)

    def _add_namespace(self, name: str) -> str:
        ns = f"baton-{self.tag}-{name}"
        self._ip("netns", "add", ns)
        self.namespaces.append(ns)
        self._ip("-n", ns, "link", "set", "lo", "up")
        return ns

    def add_host(self, name: str, index: int) -> tuple[str, str]:
        """A namespace with eth0 = SUBNET.index on the bridge; returns (namespace, address)."""
        ns = self._add_namespace(name)
        peer = f"p{index}"
        self._ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", peer, "netns", self.switch)
        self._ip("-n", self.switch, "link", "set", peer, "master", "br0", "up")
        address = f"{self.subnet}.{index}"
        self._ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
        self._ip("-n", ns, "link", "set", "eth0", "up")
        return ns, address

    def set_link(self, ns: str, up: bool) -> None:
        self._ip("-n", ns, "link", "set", "eth0", "up" if up else "down")

    def spawn(self, ns: str, hostname: str, argv: list[str], log: Path) -> subprocess.Popen:
        """`argv` in `ns` with a hostname of its own (a UTS namespace), as on another machine."""
        with open(log, "w") as out:
            proc = subprocess.Popen(
                ["ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c",
                 'hostname "$0" && exec "$@"', hostname, *argv],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        self.processes.append(proc)
        return proc

    def close(self) -> None:
        for proc in self.processes:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.processes:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        # Deleting the switch's namespace deletes the client's veth with its peer.
        for ns in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)


def netns_unavailable() -> str | None:
    if shutil.which("ip") is None or shutil.which("unshare") is None:
        return "iproute2 (ip) and util-linux (unshare) are needed"
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN)"
    probe = f"baton-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=10)
    if made.returncode != 0:
        return f"cannot create a network namespace here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=10)
    return None


@pytest.fixture
def lab():
    if reason := netns_unavailable():
        pytest.skip(reason)
    rng = random.Random(os.getpid() ^ time.time_ns())
    tag = f"{os.getpid() % 1000}{rng.randrange(100)}"
    lab = NetnsLab(tag, subnet=f"10.{200 + rng.randrange(50)}.{rng.randrange(250)}")
    yield lab
    lab.close()


@pytest.mark.engine
def test_deployment_over_namespaces_matches_one_host_and_survives_a_link_cut(
        lab, baton_binary, tiny_model, run_baton, tmp_path):
    scheduler_port, internal_port = 50051, 50054
    config = tmp_path / "deployment.yaml"
    # One file for every host, as an operator would copy it; each process's flags say where it is.
    config.write_text(f"model: {tiny_model}\nhost: 127.0.0.1\nscheduler_port: {scheduler_port}\n"
                      f"http_port: 0\ninternal_port: {internal_port}\n"
                      "prefill: {instances: 1, base_port: 50052, threads: 1}\n"
                      "decode: {instances: 2, base_port: 50060, threads: 1}\n")
    secret = tmp_path / "deployment.secret"
    write_secret_file(secret)
    common = ["--config", str(config), "--secret-file", str(secret)]

    sched_ns, sched_ip = lab.add_host("sched", 1)
    prefill_ns, prefill_ip = lab.add_host("pre", 2)
    decode0_ns, decode0_ip = lab.add_host("dec0", 3)
    decode1_ns, decode1_ip = lab.add_host("dec1", 4)
    registry = f"{sched_ip}:{internal_port}"
    scheduler = lab.spawn(sched_ns, "sched-host", [str(baton_binary), "scheduler", *common, "--host", sched_ip],
                          tmp_path / "scheduler.log")
    lab.spawn(prefill_ns, "prefill-host",
              [str(baton_binary), "worker", *common, "--role", "prefill", "--host", prefill_ip,
               "--scheduler", registry], tmp_path / "prefill.log")
    # Decode worker 0 binds the wildcard and says where it is reached, as in a pod.
    lab.spawn(decode0_ns, "decode0-host",
              [str(baton_binary), "worker", *common, "--role", "decode", "--instance", "0",
               "--host", "0.0.0.0", "--advertise", decode0_ip, "--scheduler", registry],
              tmp_path / "decode0.log")
    lab.spawn(decode1_ns, "decode1-host",
              [str(baton_binary), "worker", *common, "--role", "decode", "--instance", "1",
               "--host", decode1_ip, "--scheduler", registry], tmp_path / "decode1.log")

    def logs() -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()}" for p in sorted(tmp_path.glob("*.log")))

    with baton.Client(f"{sched_ip}:{scheduler_port}", timeout=120) as client:
        def serving() -> bool:
            try:
                return client.health(timeout=2).status == "SERVING"
            except baton.BatonError:
                return False
        assert wait_until(serving, STARTUP_TIMEOUT_S, interval=0.2), logs()
        scheduler_log = (tmp_path / "scheduler.log").read_text()
        assert f"registered at {decode0_ip}:50060" in scheduler_log, scheduler_log
        assert f"registered at {prefill_ip}:50052" in scheduler_log, scheduler_log

        # Greedy output over four "hosts" equals the in-process run on this one.
        prompt = random_ids(40, seed=3)
        local = parse_generate_json(run_baton("generate", "--model", tiny_model, "--json",
                                              *generate_args(token_ids=prompt, max_tokens=24,
                                                             ignore_eos=True)).stdout)
        remote = client.complete(token_ids=prompt, max_tokens=24, ignore_eos=True)
        assert tuple(remote.token_ids) == local.token_ids

        # Long streams on both decode workers, then decode worker 0's link goes down mid-stream.
        requests = [{"token_ids": random_ids(24, seed=10 + i), "max_tokens": 1200, "ignore_eos": True}
                    for i in range(6)]
        baseline = [StreamWatcher(client.generate(**r)) for r in requests]
        assert all(w.join(180) and w.error is None for w in baseline), logs()
        fault_free = [[t for c in w.chunks for t in c.token_ids] for w in baseline]
        watchers = [StreamWatcher(client.generate(**r)) for r in requests]
        assert wait_until(lambda: all(w.num_tokens() >= 16 for w in watchers), 60), \
            [w.error for w in watchers]
        assert not any(w.ended_at for w in watchers), "the streams ended before the cut: make them longer"
        lab.set_link(decode0_ns, up=False)
        cut_at = time.monotonic()
        assert wait_until(lambda: "decode worker 0 (pid" in (tmp_path / "scheduler.log").read_text()
                          and "no heartbeat" in (tmp_path / "scheduler.log").read_text(),
                          CUT_OFF_TIMEOUT_S), logs()
        cut_off_after = time.monotonic() - cut_at
        for watcher in watchers:
            assert watcher.join(180), logs()
            assert watcher.error is None, f"{watcher.error}\n{logs()}"
        for i, watcher in enumerate(watchers):
            streamed = [t for c in watcher.chunks for t in c.token_ids]
            assert len(streamed) == 1200, f"request {i}: {len(streamed)} tokens"
            assert_same_run_up_to_rounding(client, requests[i], streamed, fault_free[i], f"request {i}")
        assert cut_off_after < CUT_OFF_TIMEOUT_S
    assert scheduler.poll() is None, logs()
