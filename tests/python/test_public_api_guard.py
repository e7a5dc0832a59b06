"""The public front door of a real deployment (issue 16): who may call it and what it withstands.

  * `baton serve --api-key K` (or BATON_API_KEY): every HTTP path but /health needs
    "Authorization: Bearer K" (401 with a JSON error otherwise); every gRPC call but Health needs the
    same as "authorization" metadata (UNAUTHENTICATED otherwise); the Python client sends it.
  * tls_cert/tls_key: the public gRPC and HTTP APIs serve TLS; the launcher still sees the
    deployment come up (it probes the internal port), and clients that trust the certificate work.
  * HTTP hardening: a body over http_max_body_bytes gets 413 before it is read; wrongly typed and
    out-of-range fields get 400 with a JSON error; a route or method that does not exist gets a JSON
    404/405; hundreds of connections that hold their thread (slowloris) do not starve a new client;
    a second server on the HTTP port in use is refused (no SO_REUSEPORT).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request

import grpc
import pytest

import baton
from baton.v1 import inference_pb2, inference_pb2_grpc
from serving_fixtures import DeploymentFactory

pytestmark = pytest.mark.engine

API_KEY = "sk-test-0123456789"
SLOW_CLIENTS = 300  # several times httplib's old fixed pool of 64 threads


def http(port: int, path: str, body: bytes | dict | None = None, headers: dict | None = None,
         scheme: str = "http", context: ssl.SSLContext | None = None,
         timeout: float = 30) -> tuple[int, dict]:
    """(status, parsed JSON body) of one request; POST when there is a body."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    request = urllib.request.Request(f"{scheme}://127.0.0.1:{port}{path}", data=data,
                                     headers={"Content-Type": "application/json", **(headers or {})},
                                     method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


BEARER = {"Authorization": f"Bearer {API_KEY}"}
COMPLETION = {"prompt": "Hello", "max_tokens": 3, "temperature": 0}


@pytest.fixture(scope="module")
def factory(baton_binary, tiny_model, tmp_path_factory):
    factory = DeploymentFactory(baton_binary, tiny_model, tmp_path_factory.mktemp("front-door"))
    yield factory
    problems = factory.stop_all()
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def keyed(factory):
    return factory.start("keyed", http=True, serve_args=("--api-key", API_KEY),
                         config={"http_max_body_bytes": "64KiB"})


class TestApiKey:
    def test_http_needs_the_key_except_health(self, keyed):
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": API_KEY}):
            status, body = http(keyed.http_port, "/v1/models", headers=headers)
            assert status == 401, headers
            assert body["error"]["type"] == "authentication_error"
            status, _ = http(keyed.http_port, "/v1/completions", COMPLETION, headers=headers)
            assert status == 401
        assert http(keyed.http_port, "/health")[0] == 200
        assert http(keyed.http_port, "/ping")[0] == 200  # vLLM's name for the probe, open too
        status, version = http(keyed.http_port, "/version")
        assert status == 200 and re.fullmatch(r"\d+\.\d+\.\d+", version["version"]), version
        assert http(keyed.http_port, "/metrics", headers={})[0] == 401
        status, body = http(keyed.http_port, "/v1/models", headers=BEARER)
        assert status == 200 and body["data"][0]["id"]
        status, body = http(keyed.http_port, "/v1/completions", COMPLETION, headers=BEARER)
        assert status == 200 and body["usage"]["completion_tokens"] == 3

    def test_grpc_needs_the_key_except_health(self, keyed):
        with grpc.insecure_channel(keyed.address) as channel:
            stub = inference_pb2_grpc.InferenceServiceStub(channel)
            assert stub.Health(inference_pb2.HealthRequest(), timeout=10).status == \
                inference_pb2.HealthResponse.STATUS_SERVING
            for metadata in ([], [("authorization", "Bearer nope")]):
                with pytest.raises(grpc.RpcError) as error:
                    stub.GetModelInfo(inference_pb2.GetModelInfoRequest(), timeout=10, metadata=metadata)
                assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
                with pytest.raises(grpc.RpcError) as error:
                    list(stub.Generate(inference_pb2.GenerateRequest(text="Hello"), timeout=10,
                                       metadata=metadata))
                assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with baton.Client(keyed.address, timeout=60) as client:  # no key
            with pytest.raises(baton.BatonError) as error:
                client.model_info()
            assert "API key" in str(error.value)
        with baton.Client(keyed.address, timeout=60, api_key=API_KEY) as client:
            assert client.complete(prompt="Hello", max_tokens=3, ignore_eos=True).token_ids

    def test_reflection_needs_the_key(self, keyed):
        """Issue 37, defect 7: reflection answered without the key."""
        reflection_pb2 = pytest.importorskip("grpc_reflection.v1alpha.reflection_pb2")
        with grpc.insecure_channel(keyed.address) as channel:
            for package in ["grpc.reflection.v1", "grpc.reflection.v1alpha"]:
                call = channel.stream_stream(
                    f"/{package}.ServerReflection/ServerReflectionInfo",
                    request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
                    response_deserializer=reflection_pb2.ServerReflectionResponse.FromString)
                listing = [reflection_pb2.ServerReflectionRequest(list_services="")]
                with pytest.raises(grpc.RpcError) as error:
                    list(call(iter(listing), timeout=10))
                assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED, package
                [answer] = list(call(iter(listing), timeout=10, metadata=[("authorization", f"Bearer {API_KEY}")]))
                assert "baton.v1.InferenceService" in {s.name for s in answer.list_services_response.service}

    @pytest.mark.parametrize("endpoint", ["grpc", "http"])
    def test_bench_presents_the_key(self, keyed, endpoint, run_baton, tiny_model, tmp_path):
        target = (["--server", keyed.address] if endpoint == "grpc"
                  else ["--openai-url", f"http://127.0.0.1:{keyed.http_port}"])
        args = ["bench", *target, "--model", tiny_model, "--no-progress", "--workload", "random",
                "--random-input-len", "8", "--random-output-len", "3", "--rate", "50",
                "--num-requests", "3", "--warmup", "0"]
        refused = run_baton(*args, check=False, timeout=120)
        assert refused.returncode != 0, refused.stderr
        assert ("UNAUTHENTICATED" if endpoint == "grpc" else "HTTP 401") in refused.stderr, refused.stderr
        summary = tmp_path / "summary.json"
        run_baton(*args, "--api-key", API_KEY, "--summary-json", summary, timeout=120)
        completed = json.loads(summary.read_text())
        assert (completed["num_completed"], completed["num_failed"]) == (3, 0), completed
        run_baton(*args, timeout=120, env={**os.environ, "BATON_API_KEY": API_KEY})

    def test_invalid_utf8_over_grpc_is_invalid_argument(self, keyed):
        """A string field that is not UTF-8 fails protobuf's parse before any handler runs: the
        client hears INVALID_ARGUMENT naming the method, not gRPC's bare INTERNAL."""
        raw = inference_pb2.GenerateRequest(text="Hello").SerializeToString()
        raw = raw.replace(b"Hello", b"\xffello")
        with grpc.insecure_channel(keyed.address) as channel:
            generate = channel.unary_stream("/baton.v1.InferenceService/Generate")  # bytes as they are
            with pytest.raises(grpc.RpcError) as error:
                list(generate(raw, timeout=10, metadata=[("authorization", f"Bearer {API_KEY}")]))
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, error.value
        assert "does not parse as /baton.v1.InferenceService/Generate's message" in error.value.details()
        assert "invalid UTF-8" in error.value.details()

    def test_the_python_client_reads_the_environment(self, keyed, monkeypatch):
        monkeypatch.setenv("BATON_API_KEY", API_KEY)
        with baton.Client(keyed.address, timeout=60) as client:
            assert client.model_info().max_model_len > 0


class TestHttpHardening:
    def test_a_body_over_the_limit_gets_413_before_it_is_read(self, keyed):
        status, body = http(keyed.http_port, "/v1/completions", b"{" + b" " * (65 << 10) + b"}",
                            headers=BEARER)
        assert status == 413
        assert "larger than the limit of 65536 bytes" in body["error"]["message"]

    @pytest.mark.parametrize("field, value, message", [
        ("stream", "yes", "'stream' must be true or false"),
        ("max_tokens", 2**32 + 4, "'max_tokens' is out of range"),
        ("max_tokens", "16", "'max_tokens' must be an integer"),
        ("seed", -1, "'seed' is out of range"),
        ("temperature", [1], "'temperature' must be a number"),
        ("prompt", [1, 2**40], "token id 1099511627776 is out of range"),
    ])
    def test_wrong_fields_get_400_with_a_json_error(self, keyed, field, value, message):
        status, body = http(keyed.http_port, "/v1/completions", {**COMPLETION, field: value},
                            headers=BEARER)
        assert status == 400, body
        assert message in body["error"]["message"]
        assert body["error"]["type"] == "invalid_request_error"

    def test_null_means_the_default(self, keyed):
        status, body = http(keyed.http_port, "/v1/completions",
                            {**COMPLETION, "stream": None, "seed": None, "stop": None}, headers=BEARER)
        assert status == 200, body

    def test_unknown_routes_and_methods_get_json(self, keyed):
        status, body = http(keyed.http_port, "/v2/nothing", headers=BEARER)
        assert status == 404 and "no route for GET /v2/nothing" in body["error"]["message"]
        status, body = http(keyed.http_port, "/v1/completions", headers=BEARER)  # GET
        assert status in (404, 405) and body["error"]["message"]
        status, body = http(keyed.http_port, "/v1/completions", b"{not json", headers=BEARER)
        assert status == 400 and body["error"]["message"] == "the body is not valid JSON"

    def test_slow_clients_do_not_starve_a_new_one(self, keyed):
        held = []
        try:
            for _ in range(SLOW_CLIENTS):
                sock = socket.create_connection(("127.0.0.1", keyed.http_port), timeout=10)
                sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n")
                held.append(sock)
            start = time.monotonic()
            status, _ = http(keyed.http_port, "/v1/models", headers=BEARER, timeout=10)
            waited = time.monotonic() - start
            assert status == 200
            assert waited < 5, f"a new client waited {waited:.1f} s behind {SLOW_CLIENTS} slow ones"
        finally:
            for sock in held:
                sock.close()

    def test_a_second_server_on_the_http_port_is_refused(self, keyed):
        with socket.socket() as intruder:
            with pytest.raises(OSError):
                intruder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                intruder.bind(("127.0.0.1", keyed.http_port))


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl (the command) is not installed: cannot make a test certificate")
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                    "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def test_tls_on_both_public_apis(factory, certificate):
    cert, key = certificate
    deployment = factory.start("tls", http=True, config={"tls_cert": str(cert), "tls_key": str(key)})
    assert "TLS" in deployment.stderr.text()
    context = ssl.create_default_context(cafile=str(cert))
    status, body = http(deployment.http_port, "/v1/completions", COMPLETION, scheme="https", context=context)
    assert status == 200 and body["usage"]["completion_tokens"] == 3
    with pytest.raises((urllib.error.URLError, ConnectionError)):  # plain text is not served
        http(deployment.http_port, "/health", timeout=5)
    with baton.Client(deployment.address, timeout=60, root_certificates=cert.read_bytes()) as client:
        assert client.health().status == "SERVING"
        assert client.complete(prompt="Hello", max_tokens=3, ignore_eos=True).token_ids
    with baton.Client(deployment.address, timeout=5) as plain:  # a plain-text client gets nothing
        with pytest.raises(baton.BatonError):
            plain.model_info()
    deployment.stop()
