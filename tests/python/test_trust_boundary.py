"""The trust boundary of a real deployment (issue 16): who may call what.

  * the public port serves only the public API: no worker registry, and reflection lists only it;
  * the worker registry (internal port) and every worker's API refuse a call without the deployment
    secret, or with a wrong one, UNAUTHENTICATED, before doing anything; with it they answer;
  * a second deployment on ports in use fails to start and names the port.
"""

from __future__ import annotations

import random
import re
import subprocess

import grpc
import pytest

from baton.v1 import worker_pb2, worker_pb2_grpc
from serving_fixtures import SECRET_METADATA, DeploymentFactory, pick_port_block

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def deployment(baton_binary, tiny_model, tmp_path_factory):
    factory = DeploymentFactory(baton_binary, tiny_model, tmp_path_factory.mktemp("trust"))
    yield factory.start("trust", num_prefill=1, num_decode=1)
    problems = factory.stop_all()
    assert not problems, "\n".join(problems)


def internal_port(deployment) -> int:
    text = deployment.effective_config.read_text()
    return int(next(line.split(":")[1] for line in text.splitlines() if line.startswith("internal_port:")))


def registration() -> worker_pb2.RegisterRequest:
    return worker_pb2.RegisterRequest(role=worker_pb2.WORKER_ROLE_PREFILL, instance_idx=-1,
                                      incarnation_id="intruder", address="127.0.0.1:1", num_kv_blocks=8)


def test_the_public_port_has_no_worker_registry(deployment):
    with grpc.insecure_channel(deployment.address) as channel:
        with pytest.raises(grpc.RpcError) as error:
            worker_pb2_grpc.WorkerRegistryServiceStub(channel).Register(registration(), timeout=5)
        assert error.value.code() == grpc.StatusCode.UNIMPLEMENTED
        reflection = pytest.importorskip("grpc_reflection.v1alpha.proto_reflection_descriptor_database")
        services = reflection.ProtoReflectionDescriptorDatabase(channel).get_services()
        assert "baton.v1.InferenceService" in services
        assert not [s for s in services if "Worker" in s], services
        # Issue 37, defect 7: the internal file was served to anyone who asked for it by name.
        database = reflection.ProtoReflectionDescriptorDatabase(channel)
        for symbol in ["baton.v1.WorkerService", "baton.v1.WorkerRegistryService", "baton.v1.RegisterRequest"]:
            with pytest.raises(KeyError):
                database.FindFileContainingSymbol(symbol)
        with pytest.raises(KeyError):
            database.FindFileByName("baton/v1/worker.proto")


@pytest.mark.parametrize("secret", [None, "0" * 64, "wrong"])
def test_the_internal_apis_refuse_a_caller_without_the_secret(deployment, secret):
    metadata = [] if secret is None else [(SECRET_METADATA, secret)]
    with grpc.insecure_channel(f"127.0.0.1:{internal_port(deployment)}") as channel:
        with pytest.raises(grpc.RpcError) as error:
            worker_pb2_grpc.WorkerRegistryServiceStub(channel).Register(registration(), timeout=5,
                                                                        metadata=metadata)
        assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
    for worker, port in deployment.worker_ports.items():
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = worker_pb2_grpc.WorkerServiceStub(channel)
            for call, request in [(stub.GetStats, worker_pb2.GetStatsRequest()),
                                  (stub.Drain, worker_pb2.DrainRequest()),
                                  (stub.Cancel, worker_pb2.CancelRequest(request_id="any")),
                                  (stub.Release, worker_pb2.ReleaseRequest(request_id="any"))]:
                with pytest.raises(grpc.RpcError) as error:
                    call(request, timeout=5, metadata=metadata)
                assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED, (worker, call)
    # Nothing was drained or registered: the deployment still serves, and the secret's holder is let in.
    with deployment.client() as client:
        assert client.complete(prompt="Hello", max_tokens=4, ignore_eos=True).token_ids
    stats = deployment.worker_stats()
    assert set(stats) == set(deployment.worker_ports)


def test_a_second_deployment_on_ports_in_use_fails_and_names_the_port(deployment, baton_binary, tmp_path):
    # The same deployment again: its launcher is refused at once, naming the first one.
    same = subprocess.run([str(baton_binary), "serve", "--config", str(deployment.effective_config),
                           "--startup-timeout", "60", "--stop-grace", "2"],
                          capture_output=True, text=True, timeout=120)
    assert same.returncode != 0
    assert (f"127.0.0.1:{deployment.scheduler_port} is in use: another baton serve (pid "
            f"{deployment.launcher.pid}) runs this deployment") in same.stderr, same.stderr[-3000:]
    # Another deployment (its own public port) whose other ports clash: a listener names its port.
    config = tmp_path / "clash.yaml"
    free_port = pick_port_block(1, random.Random())
    config.write_text(re.sub(r"(?m)^scheduler_port: \d+$", f"scheduler_port: {free_port}",
                             deployment.effective_config.read_text()))
    proc = subprocess.run([str(baton_binary), "serve", "--config", str(config),
                           "--startup-timeout", "60", "--stop-grace", "2"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    ports = {str(p) for p in [internal_port(deployment), *deployment.worker_ports.values()]}
    refusals = [line for line in proc.stderr.splitlines() if "in use" in line]
    assert any(port in line for line in refusals for port in ports), proc.stderr[-3000:]
    # The first deployment is untouched.
    with deployment.client() as client:
        assert client.complete(prompt="Hello", max_tokens=4, ignore_eos=True).token_ids
