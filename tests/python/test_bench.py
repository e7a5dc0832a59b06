"""`baton bench` end to end against a real `baton serve` (the tiny model, disaggregated, on
loopback), and the Python analysis (benchmarks/analysis/) on what it wrote:
  * a short open-loop run: every request completes with exactly the planned prompt and output
    lengths, the server's phase breakdown (with the KV transfer) is recorded, the summary and the
    JSONL agree;
  * a tiny goodput search writes goodput.json and one JSONL per run;
  * Ctrl-C stops a run cleanly: exit 130, what was recorded is written;
  * make_results.py turns the results into RESULTS.md and its four PNG figures;
  * vLLM's spellings: `baton serve MODEL --port --grpc-port --served-model-name --max-model-len` and
    `baton bench --backend openai-chat --base-url --dataset-name --num-prompts --request-rate
    --goodput` against /v1/chat/completions.
The analysis functions are also checked on hand-made records, without a server.
"""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from serving_fixtures import (STARTUP_TIMEOUT_S, STOP_GRACE_S, Deployment, DeploymentFactory,
                              LineCollector, pick_port_block, write_secret_file)

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "benchmarks" / "analysis"))

import bench_results  # noqa: E402
import make_results  # noqa: E402

BENCH_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def server(baton_binary, tiny_model, tmp_path_factory):
    factory = DeploymentFactory(baton_binary, tiny_model, tmp_path_factory.mktemp("bench-serve"))
    yield factory.start("bench", mode="disaggregated")
    problems = factory.stop_all()
    assert not problems, "\n".join(problems)


def bench_args(server, tiny_model, *extra) -> list[str]:
    return ["bench", "--server", server.address, "--model", str(tiny_model), "--no-progress",
            "--workload", "random", "--random-input-len", "16:64", "--random-output-len", "4:12",
            "--seed", "1", *extra]


@pytest.fixture(scope="module")
def tiny_bf16_model(make_checkpoint_module, tmp_path_factory):
    out = tmp_path_factory.mktemp("bf16") / "tiny-bf16"
    make_checkpoint_module.write_checkpoint(out, "tiny", dtype="bf16")
    return out


@pytest.fixture(scope="module")
def vllm_style_server(baton_binary, tiny_bf16_model):
    """The default deployment started with vLLM's flags: gRPC on P (prefill P+1, decode P+2, the
    internal registry P+3), the OpenAI HTTP port (--port) on P+4. No --dtype: vLLM's auto, the
    checkpoint's torch_dtype (bfloat16)."""
    base = pick_port_block(5, random.Random(time.time_ns()))
    launcher = subprocess.Popen(
        [str(baton_binary), "serve", str(tiny_bf16_model), "--port", str(base + 4), "--grpc-port", str(base),
         "--served-model-name", "tiny-chat", "tiny-alias", "--max-model-len", "512",
         "--stop-grace", str(STOP_GRACE_S), "--startup-timeout", str(int(STARTUP_TIMEOUT_S))],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    deployment = Deployment(name="vllm-style", launcher=launcher, scheduler_port=base,
                            worker_ports={"prefill worker 0": base + 1, "decode worker 0": base + 2},
                            secret="", internal_port=base + 3, http_port=base + 4,
                            stdout=LineCollector(launcher.stdout), stderr=LineCollector(launcher.stderr))
    serving = deployment.stdout.wait_for(r"^baton: serving ", STARTUP_TIMEOUT_S + 5,
                                         alive=lambda: launcher.poll() is None)
    if serving is None:
        deployment.stop()
        pytest.fail(f"baton serve with vLLM's flags did not start:\n{deployment.stderr.text()[-3000:]}")
    yield deployment
    problems = deployment.stop()
    assert not problems, "\n".join(problems)


@pytest.mark.engine
def test_serve_with_vllm_flags_and_bench_the_chat_endpoint(run_baton, vllm_style_server, tiny_model,
                                                           tmp_path):
    server = vllm_style_server
    assert re.search(rf"^baton: serving tiny-chat on 127\.0\.0\.1:{server.scheduler_port} .*OpenAI HTTP "
                     rf"on port {server.http_port}\)$", server.stdout.text(), re.M), server.stdout.text()
    with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/v1/models", timeout=30) as answer:
        models = json.load(answer)["data"]
    assert [(m["id"], m["max_model_len"]) for m in models] == [("tiny-chat", 512), ("tiny-alias", 512)]
    # Any of the names serves; answers carry the first (vLLM's rule).
    request = urllib.request.Request(f"http://127.0.0.1:{server.http_port}/v1/completions",
                                     data=json.dumps({"model": "tiny-alias", "prompt": "Hi",
                                                      "max_tokens": 2}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert json.load(answer)["model"] == "tiny-chat"
    with server.client() as client:  # the gRPC port
        assert client.complete(prompt="Hello", max_tokens=3, ignore_eos=True).token_ids
        assert client.model_info().dtype == "bf16"

    out = tmp_path / "chat.jsonl"
    summary_path = tmp_path / "summary.json"
    proc = run_baton("bench", "--backend", "openai-chat", "--base-url", f"http://127.0.0.1:{server.http_port}",
                     "--model", str(tiny_model), "--no-progress", "--dataset-name", "random",
                     "--random-input-len", "16:48", "--random-output-len", "4:10", "--seed", "3",
                     "--num-prompts", "8", "--request-rate", "5", "--goodput", "ttft:5000", "tpot:1000",
                     "--warmup", "0", "--output", out, "--summary-json", summary_path,
                     timeout=BENCH_TIMEOUT_S)
    assert f"http://127.0.0.1:{server.http_port}/v1/chat/completions" in proc.stdout
    assert "baton bench: model tiny-chat, max_model_len 512" in proc.stderr
    assert "baton bench: chat endpoint: each prompt goes as one user message" in proc.stderr
    assert "TTFT <= 5000.0 ms and TPOT <= 1000.0 ms" in proc.stdout, proc.stdout
    records = bench_results.load_records(out)
    assert len(records) == 8
    for r in records:
        assert r["ok"], r
        # ignore_eos holds on chat too: exactly the planned output. A chat delta is a token's
        # event only when it carries text (vLLM's benchmark counts them so): a token that completes
        # no character (part of a UTF-8 sequence, which the machine-trained tiny tokenizer may
        # have; make_checkpoint.py) sends an empty delta.
        assert r["num_output_tokens"] == r["output_len"], r
        assert 1 <= len(r["token_s"]) <= r["output_len"], r
        # The prompt went as one user message: the chat template's tokens come on top.
        assert r["num_prompt_tokens"] > r["input_len"], r
    summary = json.loads(summary_path.read_text())
    assert summary["num_completed"] == 8


@pytest.mark.engine
@pytest.mark.parametrize("args, says", [
    (("--dataset-name", "sonnet"), "baton bench: --dataset-name 'sonnet': expected sharegpt "
                                   "(= --workload chatbot), random (= --workload random) or prefix_repetition"),
    (("--goodput", "ttft:500", "e2el:2000"), "baton bench: --goodput e2el: not supported"),
    (("--goodput", "ttft:500"), "baton bench: --goodput needs both ttft:MS and tpot:MS"),
    (("--backend", "tgi"), "baton bench: --backend 'tgi': expected openai, vllm"),
    (("--backend", "openai-chat", "--endpoint", "/v1/completions"),
     "baton bench: --backend openai-chat: the endpoint (http://127.0.0.1:8000/v1/completions) must end"),
    (("--endpoint", "/v1/chat/completions", "--prompt-format", "ids"),
     "baton bench: --prompt-format ids: the chat endpoint takes text"),
    (("--workload", "random", "--dataset-name", "random"), "--workload excludes --dataset-name"),
    (("--slo-ttft", "1", "--goodput", "ttft:1", "tpot:2"), "excludes --goodput"),
], ids=["dataset", "e2el", "goodput-half", "backend", "chat-backend-endpoint", "chat-ids",
        "workload-and-dataset", "slo-and-goodput"])
def test_vllm_bench_flags_are_checked_before_the_run(run_baton, tiny_model, args, says):
    proc = run_baton("bench", "--model", str(tiny_model), "--num-prompts", "1", "--request-rate", "1",
                     *args, check=False, timeout=30)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert says in proc.stderr, proc.stderr


@pytest.mark.engine
def test_open_loop_run_records_every_request(run_baton, server, tiny_model, tmp_path):
    out = tmp_path / "run.jsonl"
    summary_path = tmp_path / "summary.json"
    proc = run_baton(*bench_args(server, tiny_model, "--rate", "5", "--num-requests", "10",
                                 "--warmup", "1", "--slo-ttft", "5000", "--slo-tpot", "1000",
                                 "--label", "disagg", "--output", out, "--summary-json",
                                 summary_path),
                     timeout=BENCH_TIMEOUT_S)
    records = bench_results.load_records(out)
    assert len(records) == 10
    assert [r["warmup"] for r in records] == [True] + [False] * 9
    for r in records:
        assert r["ok"], r["error"]
        assert 16 <= r["input_len"] <= 64 and 4 <= r["output_len"] <= 12
        # The server saw exactly the planned prompt and generated exactly the planned output.
        assert r["num_prompt_tokens"] == r["input_len"]
        assert r["num_output_tokens"] == r["output_len"] == len(r["token_s"])
        assert r["finish_reason"] == "length"
        assert r["token_s"] == sorted(r["token_s"]) and r["token_s"][0] >= r["sent_s"] >= r["arrival_s"]
        assert 0 < r["ttft_s"] <= r["e2e_s"]
        phases = r["phases"]
        assert phases["prefill_s"] > 0 and phases["queue_s"] >= 0
        assert phases["kv_transfer_s"] is not None and phases["kv_transfer_s"] >= 0
        assert phases["first_decode_s"] is not None
    arrivals = [r["arrival_s"] for r in records]
    assert arrivals == sorted(arrivals) and arrivals[0] == 0

    summary = json.loads(summary_path.read_text())
    assert summary["label"] == "disagg"
    assert summary["num_measured"] == 9 and summary["num_completed"] == 9
    assert summary["num_warmup"] == 1
    assert summary["prefill_s"] is not None and summary["kv_transfer_s"] is not None
    assert summary["attainment"] == pytest.approx(bench_results.attainment(records, 5.0, 1.0))
    ttft = bench_results.latency_values(records, "ttft_s")
    assert summary["ttft_s"]["p90"] == pytest.approx(bench_results.percentile(ttft, 90))
    assert "TTFT" in proc.stdout and "SLO attainment" in proc.stdout
    assert "context fit" in proc.stderr

    # The same seed plans the same requests.
    again = tmp_path / "again.jsonl"
    run_baton(*bench_args(server, tiny_model, "--rate", "5", "--num-requests", "10", "--output", again),
              timeout=BENCH_TIMEOUT_S)
    assert [(r["input_len"], r["output_len"], r["arrival_s"]) for r in records] == \
           [(r["input_len"], r["output_len"], r["arrival_s"]) for r in bench_results.load_records(again)]


@pytest.mark.engine
@pytest.mark.parametrize("workload", [("--workload", "shared-prefix"), ("--dataset-name", "prefix_repetition")])
def test_shared_prefix_run_reports_the_prefix_hit_rate(run_baton, server, tiny_model, tmp_path, workload):
    summary_path = tmp_path / "summary.json"
    out = tmp_path / "run.jsonl"
    proc = run_baton("bench", "--server", server.address, "--model", str(tiny_model), "--no-progress", *workload,
                     "--prefix-repetition-prefix-len", "64", "--prefix-repetition-suffix-len", "8",
                     "--prefix-repetition-num-prefixes", "2", "--prefix-repetition-output-len", "4",
                     "--rate", "4", "--num-requests", "12", "--warmup", "2", "--output", out,
                     "--summary-json", summary_path, timeout=BENCH_TIMEOUT_S)
    records = bench_results.load_records(out)
    assert all(r["ok"] and r["input_len"] == 72 for r in records)
    # A request whose prefix is warm takes its 4 full blocks from the prefill worker's cache.
    assert max(r["num_cached_tokens"] for r in records) == 64
    summary = json.loads(summary_path.read_text())
    assert 0.3 < summary["prefix_hit_rate"] < 64 / 72 + 1e-9
    assert "prefix cache:" in proc.stdout and "of prompt tokens reused" in proc.stdout


@pytest.mark.engine
def test_multi_turn_sessions_send_each_turn_behind_its_history(run_baton, server, tiny_model, tmp_path):
    out = tmp_path / "run.jsonl"
    run_baton(*bench_args(server, tiny_model, "--multi-turn", "3", "--think-time", "0.05", "--rate", "2",
                          "--num-requests", "3", "--output", out), timeout=BENCH_TIMEOUT_S)
    records = bench_results.load_records(out)
    assert len(records) == 9  # 3 sessions of 3 turns, random lengths far from the context's end
    for session in range(3):
        turns = records[3 * session:3 * session + 3]
        assert all(r["ok"] for r in turns), [r["error"] for r in turns]
        for before, after in zip(turns, turns[1:]):
            # The history (prompt and answer) comes first, sent once the answer is complete.
            assert after["input_len"] > before["input_len"] + before["output_len"]
            assert after["num_prompt_tokens"] == after["input_len"]
            assert after["sent_s"] >= before["end_s"] + 0.05
            assert after["num_cached_tokens"] >= before["input_len"] // 16 * 16


@pytest.mark.engine
def test_multi_turn_over_openai_resends_the_answers_text_as_history(run_baton, vllm_style_server, tiny_model,
                                                                    tmp_path):
    """The completions API streams text: each answer joins the history as the tokenizer's ids of its
    text, as a chat client resends what it showed."""
    out = tmp_path / "run.jsonl"
    run_baton("bench", "--openai-url", f"http://127.0.0.1:{vllm_style_server.http_port}", "--model", str(tiny_model),
              "--no-progress", "--workload", "random", "--random-input-len", "40:64", "--random-output-len",
              "4:8", "--seed", "2", "--multi-turn", "3", "--think-time", "0", "--rate", "2",
              "--num-requests", "2", "--warmup", "0", "--output", out, timeout=BENCH_TIMEOUT_S)
    records = bench_results.load_records(out)
    assert len(records) == 6 and all(r["ok"] for r in records), [r["error"] for r in records]
    for before, after in zip(records, records[1:]):
        if after["request_idx"] % 3 == 0:
            continue  # a new session
        assert after["num_prompt_tokens"] == after["input_len"] > before["input_len"]
        assert after["num_cached_tokens"] >= before["input_len"] // 16 * 16


@pytest.mark.engine
def test_multi_turn_needs_token_id_prompts(run_baton, tiny_model):
    proc = run_baton("bench", "--openai-url", "http://127.0.0.1:9", "--model", str(tiny_model), "--no-progress",
                     "--prompt-format", "text", "--multi-turn", "2", "--rate", "1", "--max-model-len", "512",
                     check=False)
    assert proc.returncode != 0
    assert "--multi-turn sends each history as token ids" in proc.stderr, proc.stderr


@pytest.mark.engine
def test_fault_run_kills_workers_and_loses_no_request(run_baton, fresh_deployments, tiny_model, tmp_path):
    """`--fault decode:kill:2s`: the bench kills a decode worker found through the deployment's
    registry every 2 s; the deployment moves its requests and restarts it, so none fails."""
    deployment = fresh_deployments.start("bench-faults", num_prefill=1, num_decode=2)
    summary_path = tmp_path / "summary.json"
    run_baton(*bench_args(deployment, tiny_model, "--rate", "4", "--num-requests", "24", "--warmup", "0",
                          "--fault", "decode:kill:2s", "--fault-registry",
                          f"127.0.0.1:{deployment.internal_port}", "--secret-file", deployment.secret_file,
                          "--request-timeout", "90", "--summary-json", summary_path),
              timeout=BENCH_TIMEOUT_S)
    summary = json.loads(summary_path.read_text())
    dealt = [f for f in summary["faults"] if not f["error"]]
    assert dealt, summary["faults"]
    first = dealt[0]
    assert first["action"] == "kill" and first["worker"] in ("decode worker 0", "decode worker 1")
    assert first["pid"] == deployment.pids[first["worker"]]
    assert 1.5 < first["time_s"] < 4, first
    assert deployment.restarted_pid(first["worker"], restart=1, timeout=30) is not None, deployment.log()
    assert summary["num_failed"] == 0, summary["errors"]
    assert summary["num_completed"] == 24


@pytest.mark.engine
def test_fault_flags_are_checked_before_the_run(run_baton, server, tiny_model, tmp_path):
    no_registry = run_baton(*bench_args(server, tiny_model, "--rate", "1", "--num-requests", "1",
                                        "--fault", "decode:kill:5s"), check=False)
    assert no_registry.returncode == 2
    assert "--fault needs --fault-registry" in no_registry.stderr
    bad_spec = run_baton(*bench_args(server, tiny_model, "--rate", "1", "--num-requests", "1",
                                     "--fault", "decode:explode:5s"), check=False)
    assert bad_spec.returncode == 2 and 'unknown action "explode"' in bad_spec.stderr
    # The registry refuses a wrong secret before any request is sent.
    wrong_secret = tmp_path / "wrong.secret"
    write_secret_file(wrong_secret)
    refused = run_baton(*bench_args(server, tiny_model, "--rate", "1", "--num-requests", "1",
                                    "--fault", "decode:kill:5s", "--fault-registry",
                                    f"127.0.0.1:{server.internal_port}", "--secret-file", wrong_secret),
                        check=False)
    assert refused.returncode == 1 and "ListWorkers" in refused.stderr, refused.stderr


@pytest.mark.engine
def test_plan_calibrate_reads_the_servers_timings(run_baton, server, tiny_model, tmp_path):
    out = tmp_path / "run.jsonl"
    run_baton(*bench_args(server, tiny_model, "--rate", "4", "--num-requests", "12", "--warmup", "0",
                          "--output", out), timeout=BENCH_TIMEOUT_S)
    # Coefficients of the right order for `tiny` on one core (the fit's own test lives in C++).
    coefficients = tmp_path / "tiny.json"
    coefficients.write_text(json.dumps({"model": "tiny", "device": "cpu", "source": "test",
                                        "tp": {"1": {"prefill": [4, 0.12, 7e-5], "decode": [1.5, 9e-4, 0.45]}}}))
    calibrated = tmp_path / "calibrated.json"
    proc = run_baton("plan", "calibrate", "--coefficients", coefficients, "--records", out,
                     "--output", calibrated)
    assert "prefill:" in proc.stdout and "decode:" in proc.stdout
    doc = json.loads(calibrated.read_text())
    assert doc["tp"] == json.loads(coefficients.read_text())["tp"]
    factors = doc["serving_slowdown"]
    assert set(factors) == {"prefill_alone", "prefill_shared", "decode_alone", "decode_shared"}
    assert all(0.5 <= f < 50 for f in factors.values()), factors
    assert str(out) in doc["source"]
    bad = run_baton("plan", "calibrate", "--coefficients", coefficients, "--records", tmp_path / "none.jsonl",
                    "--output", calibrated, check=False)
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1
    assert run_baton("plan", "calibrate", "--records", out, check=False).returncode == 2


@pytest.mark.engine
def test_plan_calibrate_reads_the_workers_step_traces(run_baton, baton_binary, tiny_model, tmp_path):
    traces = tmp_path / "traces"
    factory = DeploymentFactory(baton_binary, tiny_model, tmp_path / "serve")
    (tmp_path / "serve").mkdir()
    try:
        deployment = factory.start("traced", mode="colocated", num_colocated=2,
                                   colocated={"chunked_prefill": "true"},
                                   serve_args=("--step-trace-dir", str(traces)))
        run_baton(*bench_args(deployment, tiny_model, "--rate", "4", "--num-requests", "12", "--warmup", "0"),
                  timeout=BENCH_TIMEOUT_S)
    finally:
        problems = factory.stop_all()  # the workers flush their traces as they stop
    assert not problems, "\n".join(problems)
    files = sorted(traces.glob("*.jsonl"))
    assert [f.name for f in files] == ["colocated-0.jsonl", "colocated-1.jsonl"]
    header = json.loads(files[0].read_text().splitlines()[0])
    assert header["role"] == "colocated" and header["tp"] == 1 and header["pp"] == 1
    steps = [json.loads(line) for f in files for line in f.read_text().splitlines()[1:]]
    assert sum(s["prompt_tokens"] for s in steps) >= 12 * 16, "every prompt's tokens went through a step"
    coefficients = tmp_path / "tiny.json"
    coefficients.write_text(json.dumps({"model": "tiny", "device": "cpu", "source": "test",
                                        "tp": {"1": {"prefill": [4, 0.12, 7e-5], "decode": [1.5, 9e-4, 0.45]}}}))
    calibrated = tmp_path / "calibrated.json"
    proc = run_baton("plan", "calibrate", "--coefficients", coefficients, "--step-traces", traces,
                     "--output", calibrated)
    assert "prefill:" in proc.stdout and "steps" in proc.stdout
    factors = json.loads(calibrated.read_text())["serving_slowdown"]
    assert all(0.5 <= f < 50 for f in factors.values()), factors
    assert "step traces" in json.loads(calibrated.read_text())["source"]
    both = run_baton("plan", "calibrate", "--coefficients", coefficients, "--step-traces", traces,
                     "--records", files[0], "--output", calibrated, check=False)
    assert both.returncode == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    none = run_baton("plan", "calibrate", "--coefficients", coefficients, "--step-traces", empty,
                     "--output", calibrated, check=False)
    assert none.returncode == 1 and "no .jsonl step trace" in none.stderr


@pytest.mark.engine
def test_goodput_search_and_results(run_baton, server, tiny_model, tmp_path):
    results = tmp_path / "results"
    deployment_dir = results / "disagg-tiny"
    run_baton("bench", "goodput", "--server", server.address, "--model", str(tiny_model),
              "--no-progress", "--workload", "random", "--random-input-len", "16:32",
              "--random-output-len", "4:8", "--slo-ttft", "5000", "--slo-tpot", "2000",
              "--initial-rate", "2", "--min-duration", "1", "--min-requests", "4",
              "--max-runs", "2", "--output-dir", deployment_dir, timeout=BENCH_TIMEOUT_S)
    goodput = json.loads((deployment_dir / "goodput.json").read_text())
    assert len(goodput["runs"]) == 2
    assert goodput["slo"] == {"ttft_s": 5.0, "tpot_s": 2.0}
    for run in goodput["runs"]:
        records = bench_results.load_records(deployment_dir / run["records"])
        assert run["attainment"] == pytest.approx(bench_results.attainment(records, 5.0, 2.0))
    assert goodput["goodput_per_s"] in [run["rate_per_s"] for run in goodput["runs"]] + [0]

    out = tmp_path / "RESULTS.md"
    make_results.main([str(results), "--out", str(out)])
    text = out.read_text()
    assert "disagg-tiny" in text and "## Goodput" in text
    for name in ["attainment_vs_rate", "attainment_vs_slo_scale", "latency_cdfs", "ttft_breakdown"]:
        png = results / "plots" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"plots/{name}.png" in text


@pytest.mark.engine
def test_trace_replay_keeps_its_times_and_lengths(run_baton, server, tiny_model, tmp_path):
    trace = tmp_path / "trace.jsonl"
    lines = [{"arrival_s": 10.0, "input_len": 40, "output_len": 5},
             {"arrival_s": 10.3, "prompt": "The licensee may copy the Program.", "output_len": 3},
             {"arrival_s": 10.9, "input_len": 3000, "output_len": 6}]  # clipped to the context
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "trace-run.jsonl"
    run_baton("bench", "--server", server.address, "--model", str(tiny_model), "--no-progress",
              "--workload", f"trace:{trace}", "--warmup", "0", "--output", out, timeout=BENCH_TIMEOUT_S)
    records = bench_results.load_records(out)
    assert [r["arrival_s"] for r in records] == pytest.approx([0.0, 0.3, 0.9])
    assert [r["output_len"] for r in records] == [5, 3, 6]
    assert records[0]["input_len"] == 40
    assert records[2]["input_len"] == 2048 - 6
    for r in records:
        assert r["ok"], r["error"]
        assert r["num_prompt_tokens"] == r["input_len"]
        assert r["num_output_tokens"] == r["output_len"]


@pytest.mark.engine
def test_ctrl_c_writes_what_it_has(baton_binary, server, tiny_model, tmp_path):
    out = tmp_path / "interrupted.jsonl"
    # 200 requests over ~40 s: interrupted after 3 s.
    proc = subprocess.Popen(
        [str(baton_binary), *bench_args(server, tiny_model, "--rate", "5", "--num-requests", "200",
                                        "--output", str(out))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stdout
    records = bench_results.load_records(out)
    assert 0 < len(records) < 200
    assert any(r["ok"] for r in records)


def test_analysis_functions_on_known_records():
    def record(ttft, tpot, warmup=False, ok=True):
        r = {"warmup": warmup, "cancelled": False, "ok": ok}
        if ok:
            r.update(ttft_s=ttft, tpot_s=tpot, e2e_s=ttft + 1)
        return r

    records = [record(0.1, 0.05), record(0.3, None), record(0.1, 0.2), record(9, 9, warmup=True),
               record(0, 0, ok=False)]
    assert bench_results.attainment(records, 0.2, 0.1) == pytest.approx(1 / 4)
    assert bench_results.attainment(records, 0.5, 0.5) == pytest.approx(3 / 4)
    assert bench_results.percentile([1, 2, 3, 4], 90) == pytest.approx(3.7)
    assert bench_results.latency_values(records, "tpot_s") == [0.05, 0.2]
    assert bench_results.mean_phases(records) is None
    assert bench_results.misses(records, 0.2, 0.1) == pytest.approx(
        {"ttft_only": 1 / 4, "tpot_only": 1 / 4, "both": 0, "failed": 1 / 4})


def test_results_tree_finds_every_experiment_and_compares_goodput(tmp_path):
    def deployment(directory: Path, goodput: float) -> None:
        directory.mkdir(parents=True)
        (directory / "goodput.json").write_text(json.dumps({
            "goodput_per_s": goodput, "runs": [], "slo": {"ttft_s": 1.0, "tpot_s": 0.1},
            "workload": directory.parent.name, "target_attainment": 0.9, "converged": True,
            "bracketed": True}))

    deployment(tmp_path / "tiny" / "chatbot" / "disagg-1p1d", 3.0)
    deployment(tmp_path / "tiny" / "chatbot" / "coloc-2x1", 1.0)
    deployment(tmp_path / "tiny" / "chatbot" / "coloc-1x2", 2.0)
    deployment(tmp_path / "small" / "summarization" / "coloc-2x1", 0.5)
    (tmp_path / "tiny" / "chatbot" / "plots").mkdir()  # not an experiment

    found = make_results.find_experiments(tmp_path)
    assert found == [tmp_path / "small" / "summarization", tmp_path / "tiny" / "chatbot"]
    assert make_results.find_experiments(tmp_path / "tiny" / "chatbot") == [tmp_path / "tiny" / "chatbot"]

    table = make_results.comparison_table(
        [(str(d.relative_to(tmp_path)), bench_results.load_results(d)) for d in found])
    # Only the experiment with both kinds is compared, against its best colocated deployment.
    assert table[2:] == ["| tiny/chatbot | disagg-1p1d | 3 | coloc-1x2 | 2 | 1.50× |"]


def test_llama_server_table_compares_the_best_baton_deployment(tmp_path):
    def deployment(directory: Path, goodput: float, faults=None) -> None:
        directory.mkdir(parents=True)
        (directory / "goodput.json").write_text(json.dumps({
            "goodput_per_s": goodput, "runs": [], "faults": faults or [],
            "slo": {"ttft_s": 1.0, "tpot_s": 0.1}, "workload": "chatbot", "target_attainment": 0.9,
            "converged": True, "bracketed": True}))

    both = tmp_path / "small-bf16" / "chatbot-vs-llama-server"
    deployment(both / "llama-server", 0.5)
    deployment(both / "disagg-1p1d", 0.75)
    deployment(both / "coloc-1x2-chunked", 1.5)
    deployment(both / "coloc-2x1-chunked+faults", 9.0, faults=["decode:kill:20s"])  # not compared
    deployment(tmp_path / "tiny" / "chatbot" / "coloc-2x1", 1.0)  # no llama-server: left out

    found = make_results.find_experiments(tmp_path)
    table = make_results.llama_server_table(
        [(str(d.relative_to(tmp_path)), bench_results.load_results(d)) for d in found])
    assert table[2:] == [
        "| small-bf16/chatbot-vs-llama-server | 0.5 | coloc-1x2-chunked | 1.5 | 3.00× |"]


def test_common_rate_is_the_highest_rate_every_search_ran_at():
    def searched(name: str, rates: list[float]) -> bench_results.Deployment:
        runs = [{"rate_per_s": r, "attainment": 1.0, "records": f"run-{r}.jsonl"} for r in rates]
        return bench_results.Deployment(name=name, goodput={"runs": runs})

    assert bench_results.common_rate([searched("a", [1, 0.5, 0.75]), searched("b", [1, 2, 1.5, 0.5])]) == 1
    assert bench_results.common_rate([searched("a", [1]), searched("b", [2])]) is None
    assert bench_results.common_rate([bench_results.Deployment(name="no search")]) is None
