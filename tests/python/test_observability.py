"""What a live `baton serve` tells its operator: the Prometheus metrics at GET /metrics on the
OpenAI HTTP port, grpc.health.v1.Health on the public gRPC port, and the scheduler's log.

  * /metrics parses with prometheus_client's text parser; after a known set of requests (known
    prompt lengths, max_tokens with ignore_eos) the token and request counters equal their sums, each
    per-request histogram counted every request, inter-token latency every gap, and the per-instance
    gauges are there for each worker, labelled by role and instance;
  * grpc.health.v1.Health answers SERVING for "" and "baton.v1.InferenceService" (NOT_FOUND for an
    unknown service), and NOT_SERVING once a phase has no live worker;
  * the scheduler logs one key=value line per request at info (finished or rejected), and none at
    --log-level warning.
"""

from __future__ import annotations

import json
import os
import re
import signal
import urllib.error
import urllib.request

import grpc
import pytest

from serving_fixtures import DeploymentFactory, process_alive, random_ids, wait_until

prometheus_parser = pytest.importorskip("prometheus_client.parser")
health_pb2 = pytest.importorskip("grpc_health.v1.health_pb2")
health_pb2_grpc = pytest.importorskip("grpc_health.v1.health_pb2_grpc")

# (prompt length, max_tokens): every request runs to max_tokens (ignore_eos).
REQUESTS = [(5, 4), (9, 6), (17, 7)]
PER_REQUEST_HISTOGRAMS = [
    "baton:time_to_first_token_seconds", "baton:e2e_request_latency_seconds",
    "baton:request_queue_time_seconds", "baton:request_prefill_time_seconds",
    "baton:kv_transfer_time_seconds", "baton:kv_transfer_bytes",
]
PHASES = ["queue", "prefill", "handoff_wait", "kv_transfer", "first_decode_step"]
PER_INSTANCE_GAUGES = ["baton:num_requests_running", "baton:num_requests_waiting", "baton:num_requests_swapped",
                       "baton:kv_cache_usage_perc"]
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
MODEL_NAME = "tiny-observed"  # --served-model-name: what every metric's model_name label says


@pytest.fixture(scope="module")
def deployment(baton_binary, tiny_model, tmp_path_factory):
    """1 prefill + 1 decode with the OpenAI HTTP port, that only this module's requests reach."""
    factory = DeploymentFactory(baton_binary, tiny_model, tmp_path_factory.mktemp("observability"))
    yield factory.start("observability", http=True,
                        serve_args=("--log-level", "info", "--served-model-name", MODEL_NAME))
    problems = factory.stop_all()
    assert not problems, "\n".join(problems)


def http(port: int, method: str, path: str, body: dict | None = None) -> tuple[int, str, str]:
    """(status, content type, body text)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), error.read().decode()


def scrape(port: int) -> dict[str, dict]:
    """GET /metrics, parsed: {family name: {"type", "samples": {(sample name, sorted labels): value}}}.
    Every sample carries model_name (vLLM's label), checked here and left out of the labels."""
    status, content_type, text = http(port, "GET", "/metrics")
    assert status == 200, text
    assert content_type.startswith("text/plain; version=0.0.4"), content_type
    families = {}
    for family in prometheus_parser.text_string_to_metric_families(text):
        for s in family.samples:
            assert s.labels.get("model_name") == MODEL_NAME, (s.name, s.labels)
        families[family.name] = {
            "type": family.type,
            "samples": {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "model_name"))): s.value
                        for s in family.samples}}
    return families


def value(families, family: str, sample: str | None = None, **labels) -> float:
    key = (sample or family, tuple(sorted(labels.items())))
    samples = families[family]["samples"]
    assert key in samples, (key, sorted(samples))
    return samples[key]


def log_fields(line: str) -> dict[str, str]:
    return {k: v.strip('"') for k, v in re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)', line)}


@pytest.mark.engine
def test_metrics_count_the_requests_and_tokens_served(deployment):
    for i, (prompt_len, max_tokens) in enumerate(REQUESTS):
        status, _, text = http(deployment.http_port, "POST", "/v1/completions",
                               {"prompt": random_ids(prompt_len, seed=i), "max_tokens": max_tokens,
                                "ignore_eos": True})
        assert status == 200, text
        assert json.loads(text)["usage"]["completion_tokens"] == max_tokens
    families = scrape(deployment.http_port)

    assert families["baton:prompt_tokens"]["type"] == "counter"
    assert value(families, "baton:prompt_tokens", "baton:prompt_tokens_total") == sum(p for p, _ in REQUESTS)
    assert value(families, "baton:generation_tokens", "baton:generation_tokens_total") == \
        sum(m for _, m in REQUESTS)
    assert value(families, "baton:request_success", "baton:request_success_total",
                 finished_reason="length") == len(REQUESTS)
    for name in PER_REQUEST_HISTOGRAMS:
        assert families[name]["type"] == "histogram", name
        assert value(families, name, f"{name}_count") == len(REQUESTS), name
        assert value(families, name, f"{name}_bucket", le="+Inf") == len(REQUESTS), name
        assert value(families, name, f"{name}_sum") > 0, name
    # Every token after a request's first is one gap.
    assert value(families, "baton:inter_token_latency_seconds", "baton:inter_token_latency_seconds_count") == \
        sum(m - 1 for _, m in REQUESTS)
    for phase in PHASES:
        assert value(families, "baton:request_phase_seconds", "baton:request_phase_seconds_count",
                     phase=phase) == len(REQUESTS), phase
    # The TTFT's buckets are vLLM's.
    ttft_bounds = [float(dict(labels)["le"]) for (sample, labels) in
                   families["baton:time_to_first_token_seconds"]["samples"] if sample.endswith("_bucket")]
    assert sorted(ttft_bounds)[:3] == [0.001, 0.005, 0.01]

    instances = {("prefill", "0"), ("decode", "0")}
    for name in PER_INSTANCE_GAUGES:
        assert families[name]["type"] == "gauge", name
        labelled = {(dict(labels)["role"], dict(labels)["instance"]) for (_, labels) in families[name]["samples"]}
        assert labelled == instances, (name, labelled)
    assert {dict(labels)["role"] for (_, labels) in families["baton:kv_handoff_queue_depth"]["samples"]} == \
        {"prefill"}
    # Idle now: nothing running, no KV held for a hand-off (the heartbeat says so within a second).
    def idle():
        now = scrape(deployment.http_port)
        return (value(now, "baton:num_requests_running", role="decode", instance="0") == 0 and
                value(now, "baton:kv_handoff_queue_depth", role="prefill", instance="0") == 0)
    assert wait_until(idle, 10, interval=0.1)

    # One log line per request, key=value.
    for prompt_len, max_tokens in REQUESTS:
        line = deployment.stderr.wait_for(
            rf"^baton scheduler: request .*outcome=finished finish_reason=length prompt_tokens={prompt_len} "
            rf"generated_tokens={max_tokens} ", 10)
        assert line, deployment.log()
        fields = log_fields(line.string)
        assert fields["request_id"].startswith("req-")
        for key in ["ttft_ms", "e2e_ms", "queue_ms", "prefill_ms", "kv_transfer_ms", "first_decode_step_ms"]:
            assert float(fields[key]) >= 0, (key, line.string)
        assert int(fields["kv_transfer_bytes"]) > 0


@pytest.mark.engine
def test_a_rejected_request_is_logged_and_not_counted(deployment):
    before = scrape(deployment.http_port)
    status, _, _ = http(deployment.http_port, "POST", "/v1/completions", {"prompt": [10**7], "max_tokens": 2})
    assert status == 400
    line = deployment.stderr.wait_for(r"^baton scheduler: request request_id=- outcome=rejected "
                                      r"code=INVALID_ARGUMENT error=", 10)
    assert line, deployment.log()
    # The access log: one line per HTTP answer, errors included.
    access = deployment.stderr.wait_for(r"^baton scheduler: http peer=127\.0\.0\.1:\d+ method=POST "
                                        r"path=/v1/completions status=400 ms=[0-9.]+$", 10)
    assert access, deployment.log()
    assert http(deployment.http_port, "GET", "/no/such/path")[0] == 404
    assert deployment.stderr.wait_for(r"^baton scheduler: http .* method=GET path=/no/such/path status=404 ", 10)
    after = scrape(deployment.http_port)
    assert value(after, "baton:prompt_tokens", "baton:prompt_tokens_total") == \
        value(before, "baton:prompt_tokens", "baton:prompt_tokens_total")


@pytest.mark.engine
def test_grpc_health_serves_baton_health(deployment):
    with grpc.insecure_channel(deployment.address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ["", "baton.v1.InferenceService"]:
            answer = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert answer.status == SERVING, service
        with pytest.raises(grpc.RpcError) as unknown:
            stub.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=10)
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.engine
def test_health_turns_not_serving_without_a_decode_worker_and_warning_logs_no_requests(fresh_deployments):
    deployment = fresh_deployments.start("health-quiet", http=True,
                                         serve_args=("--log-level", "warning", "--no-worker-restart"))
    status, _, text = http(deployment.http_port, "POST", "/v1/completions",
                           {"prompt": random_ids(4, seed=1), "max_tokens": 2, "ignore_eos": True})
    assert status == 200, text
    with grpc.insecure_channel(deployment.address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        check = lambda service: stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status
        # grpc.health.v1 follows the registry every 100 ms (scheduler_server.cc): on a loaded
        # machine the first answer may still be the one from before the workers registered.
        assert wait_until(lambda: check("") == SERVING, 5, interval=0.05)
        victim = deployment.pids["decode worker 0"]
        os.kill(victim, signal.SIGKILL)
        assert wait_until(lambda: not process_alive(victim), 5)
        assert wait_until(lambda: check("") == NOT_SERVING and check("baton.v1.InferenceService") == NOT_SERVING,
                          10, interval=0.1), deployment.log()
    # Warning and up only: no per-request line, no registration line; the death is a warning.
    assert deployment.stderr.wait_for(r"^baton scheduler: decode worker 0", 5), deployment.log()
    text = deployment.stderr.text()
    assert "baton scheduler: request " not in text, text
    assert "registered at" not in text, text


@pytest.mark.engine
def test_server_reflection_v1_beside_v1alpha(deployment):
    """grpc.reflection.v1 (Baton's own, runtime/rpc/reflection_v1_service.h) and v1alpha (gRPC's
    plugin) both answer on the public port. v1's messages are v1alpha's under another package, so
    grpcio-reflection's v1alpha classes speak to the v1 method."""
    reflection_pb2 = pytest.importorskip("grpc_reflection.v1alpha.reflection_pb2")
    descriptor_pb2 = pytest.importorskip("google.protobuf.descriptor_pb2")
    requests = [reflection_pb2.ServerReflectionRequest(list_services=""),
                reflection_pb2.ServerReflectionRequest(file_containing_symbol="baton.v1.InferenceService"),
                reflection_pb2.ServerReflectionRequest(file_containing_symbol="no.such.Symbol")]
    with grpc.insecure_channel(deployment.address) as channel:
        for package in ["grpc.reflection.v1", "grpc.reflection.v1alpha"]:
            call = channel.stream_stream(
                f"/{package}.ServerReflection/ServerReflectionInfo",
                request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
                response_deserializer=reflection_pb2.ServerReflectionResponse.FromString)
            listed, found, missing = list(call(iter(requests), timeout=10))
            names = {s.name for s in listed.list_services_response.service}
            assert {"baton.v1.InferenceService", "grpc.health.v1.Health",
                    "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"} <= names, \
                (package, names)
            files = [descriptor_pb2.FileDescriptorProto.FromString(b)
                     for b in found.file_descriptor_response.file_descriptor_proto]
            assert files[0].name == "baton/v1/inference.proto", package
            assert [m.name for m in files[0].service[0].method] == ["Generate", "Health", "GetModelInfo"]
            assert missing.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0], package
