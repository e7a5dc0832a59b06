"""`kv_base_port` in the prefill section: each prefill rank serves its KV blocks on a port of a fixed
range (kv_base_port + instance * tp * pp + rank) instead of one the OS picks, so that a firewall or a
container can open it. The deployment serves through them, and the ports are those."""

from __future__ import annotations

import random
import socket

import pytest

from serving_fixtures import pick_port_block


def listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(2.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.engine
def test_prefill_ranks_serve_kv_on_the_configured_ports(fresh_deployments):
    kv_base = pick_port_block(3, random.Random())  # 2 ranks, then one that must stay closed
    deployment = fresh_deployments.start("kv-ports", prefill={"tp": 2, "kv_base_port": kv_base})
    with deployment.client() as client:
        result = client.complete(prompt="The KV of this prompt crosses", max_tokens=4,
                                 ignore_eos=True)
    assert result.num_generated_tokens == 4
    assert listening(kv_base) and listening(kv_base + 1)
    assert not listening(kv_base + 2)
