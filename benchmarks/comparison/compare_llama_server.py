#!/usr/bin/env python3
"""Serving goodput of Baton's deployments next to llama.cpp's llama-server, on the same cores.

Each server is started in turn on the same checkpoint (llama-server on its GGUF conversion, made by
benchmarks/engine/hf_to_gguf.py) and searched by the same client, `baton bench goodput --openai-url`
(the OpenAI completions API over HTTP/SSE, the same workload, seed and SLOs), so the two differ only
in the server. The SLOs are --slo-scale (5) times Baton's unloaded single-thread prefill of the
workload's median prompt and decode step at batch 1 after it, as `baton_engine_bench` measures them
a moment before (benchmarks/README.md's rule), unless --slo-ttft / --slo-tpot give them. With
--rounds N the whole sequence (llama-server, then each Baton deployment) runs N times, each round in
a directory of its own (after any rounds already there), so a slow minute of a shared machine is
seen by both sides of a round. --kv-cache-dtype bf16 gives every Baton deployment a bf16 KV cache
(llama-server's is f16 by default: the same bytes per token); its deployments are labelled with a
-kvbf16 suffix. The SLOs are derived as above either way (with an f32 cache), so rounds with either
cache are held to the same objectives. --multi-turn N runs the workload as conversations of N turns
(--think-time seconds between an answer and the next turn, each turn's prompt the whole history:
the answers' text re-tokenized, as a chat client resends it), where llama-server reuses each slot's
prompt cache and Baton its prefix cache; rates then count conversations.

    .venv/bin/python benchmarks/comparison/compare_llama_server.py --llama-cpp-bin /path/to/llama.cpp/build/bin

llama.cpp is not a Baton dependency and nothing here builds it (benchmarks/README.md says one way,
with the llama-server target). Results: one `baton bench goodput` directory per server under
--out (default benchmarks/results/<machine>/<model>-<dtype>)/<workload>-vs-llama-server/roundN/,
which benchmarks/analysis/make_results.py turns into RESULTS.md sections; a Markdown table of the
goodputs and their ratio to llama-server's goes to stderr.
"""
import argparse
import json
import os
import pathlib
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks/engine"))
from compare_llama_cpp import gguf_path, run_json_lines  # noqa: E402

MAX_MODEL_LEN = 2048  # the chatbot workload's filter keeps prompt + output below it

# Baton deployments on two cores, each phase with 1 GiB of KV (f32: ~43k tokens of `small`, bf16
# twice that; the machines have 24 GiB, so memory is not what is compared). Names as
# run_comparison.sh's.
_PHASE = "threads: {threads}, kv_cache_bytes: 1GiB"
_CHUNKED = ", chunked_prefill: true, max_num_batched_tokens: {tokens}"
DEPLOYMENTS = {
    "disagg-1p1d": f"prefill: {{instances: 1, {_PHASE.format(threads=1)}}}\n"
                   f"decode: {{instances: 1, {_PHASE.format(threads=1)}}}\n",
    "coloc-2x1-chunked": "mode: colocated\ncolocated: {instances: 2, "
                         + _PHASE.format(threads=1) + _CHUNKED.format(tokens=512) + "}\n",
    "coloc-1x2-chunked": "mode: colocated\ncolocated: {instances: 1, "
                         + _PHASE.format(threads=2) + _CHUNKED.format(tokens=512) + "}\n",
}


def wait_until(ready, deadline_s: float, what: str, proc: subprocess.Popen, log: pathlib.Path) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"compare_llama_server: {what} exited ({proc.returncode}):\n"
                     f"{log.read_text(errors='replace')[-2000:]}")
        if ready():
            return
        time.sleep(0.2)
    proc.kill()
    sys.exit(f"compare_llama_server: {what} not ready after {deadline_s:.0f} s")


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# The median prompt of a workload (tokens): the SLO rule of benchmarks/README.md's comparisons.
MEDIAN_PROMPT = {"chatbot": 528, "summarization": 1974}


def unloaded_slos(args) -> tuple[float, float]:
    """(TTFT, TPOT) in ms: --slo-scale x Baton's unloaded one-thread prefill of the workload's median
    prompt and decode step at batch 1 after it (benchmarks/README.md's SLO rule)."""
    length = str(MEDIAN_PROMPT[args.workload])
    row = run_json_lines([str(args.build / "bin/baton_engine_bench"), "--model", str(args.model_dir),
                          "--dtype", args.dtype, "--threads", "1", "--rounds", "1", "--batches", "1",
                          "--prompt-len", length, "--context-len", length, "--long-context-len", "0"])[0]
    prefill_ms = MEDIAN_PROMPT[args.workload] / row["prefill_tokens_per_s"] * 1e3
    step_ms = 1e3 / row["decode_tokens_per_s"]["1"]
    print(f"compare_llama_server: unloaded prefill {prefill_ms:.0f} ms, decode step {step_ms:.2f} ms",
          file=sys.stderr)
    return args.slo_scale * prefill_ms, args.slo_scale * step_ms


def search(args, url: str, label: str, out: pathlib.Path, slos: tuple[float, float]) -> float:
    cmd = [str(args.build / "bin/baton"), "bench", "goodput", "--openai-url", url,
           "--model", str(args.model_dir), "--workload", args.workload,
           "--max-model-len", str(MAX_MODEL_LEN),  # llama-server's /v1/models does not say it
           "--slo-ttft", f"{slos[0]:.1f}", "--slo-tpot", f"{slos[1]:.1f}",
           "--label", label, "--no-progress", "--output-dir", str(out / label), *args.bench_args]
    if args.multi_turn:
        cmd += ["--multi-turn", str(args.multi_turn), "--think-time", str(args.think_time)]
    print("compare_llama_server: " + " ".join(cmd), file=sys.stderr, flush=True)
    if subprocess.run(cmd).returncode != 0:
        print(f"compare_llama_server: the search of {label} failed", file=sys.stderr)
        return float("nan")
    return json.loads((out / label / "goodput.json").read_text())["goodput_per_s"]


def llama_server(args, gguf: pathlib.Path, out: pathlib.Path, slos) -> float:
    log = out / "llama-server.log"
    cmd = [str(args.llama_cpp_bin / "llama-server"), "-m", str(gguf), "--host", "127.0.0.1",
           "--port", str(args.port), "-t", str(args.threads), "-tb", str(args.threads),
           "-np", str(args.parallel), "-c", str(args.parallel * MAX_MODEL_LEN), *args.llama_server_args]
    with open(log, "w") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: http_ok(f"http://127.0.0.1:{args.port}/health"), 120, "llama-server", proc, log)
        return search(args, f"http://127.0.0.1:{args.port}", "llama-server", out, slos)
    finally:
        stop(proc)


def baton_label(args, name: str) -> str:
    return name if args.kv_cache_dtype == "f32" else f"{name}-kv{args.kv_cache_dtype}"


def baton_server(args, name: str, out: pathlib.Path, slos) -> float:
    label = baton_label(args, name)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        config, secret, log = tmp / "deployment.yaml", tmp / "secret", out / f"{label}.log"
        config.write_text(
            f"model: {args.model_dir}\nweight_dtype: {args.dtype}\nmax_model_len: {MAX_MODEL_LEN}\n"
            f"kv_cache_dtype: {args.kv_cache_dtype}\n"
            f"scheduler_port: {args.port + 1}\nhttp_port: {args.port}\ninternal_port: {args.port + 9}\n"
            + DEPLOYMENTS[name])
        secret.write_text(secrets.token_hex(32))
        secret.chmod(0o600)  # what `baton serve --secret-file` demands
        with open(log, "w") as sink:
            proc = subprocess.Popen([str(args.build / "bin/baton"), "serve", "--config", str(config),
                                     "--secret-file", str(secret)], stdout=sink, stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: "baton: serving" in log.read_text(errors="replace"), 120,
                       f"baton ({label})", proc, log)
            return search(args, f"http://127.0.0.1:{args.port}", label, out, slos)
        finally:
            stop(proc)


def machine_tag() -> str:
    return subprocess.run([str(ROOT / "benchmarks/comparison/machine_tag.sh")], capture_output=True,
                          text=True, check=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-cpp-bin", type=pathlib.Path, required=True,
                        help="directory holding llama-server")
    parser.add_argument("--build", type=pathlib.Path, default=ROOT / "build")
    parser.add_argument("--model", default="small", help="a model under <build>/models")
    parser.add_argument("--dtype", default="bf16", choices=["f32", "bf16"])
    parser.add_argument("--workload", default="chatbot")
    parser.add_argument("--deployments", nargs="+", default=list(DEPLOYMENTS), choices=list(DEPLOYMENTS))
    parser.add_argument("--kv-cache-dtype", default="f32", choices=["f32", "bf16"],
                        help="every Baton deployment's KV cache elements")
    parser.add_argument("--threads", type=int, default=2, help="llama-server's threads")
    parser.add_argument("--parallel", type=int, default=8, help="llama-server's slots (-np)")
    parser.add_argument("--llama-server-args", nargs=argparse.REMAINDER, default=[],
                        help="more llama-server flags (last on the line)")
    parser.add_argument("--slo-scale", type=float, default=5.0)
    parser.add_argument("--slo-ttft", type=float, help="TTFT SLO, ms (default: measured x --slo-scale)")
    parser.add_argument("--slo-tpot", type=float, help="TPOT SLO, ms (default: measured x --slo-scale)")
    parser.add_argument("--multi-turn", type=int, default=0, help="turns per conversation (0: single requests)")
    parser.add_argument("--think-time", type=float, default=1.0, help="--multi-turn: seconds between turns")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--port", type=int, default=52300)
    parser.add_argument("--out", type=pathlib.Path)
    parser.add_argument("--bench-arg", dest="bench_args", action="append", default=[],
                        help="one more `baton bench goodput` argument (repeatable), e.g. "
                             "--bench-arg=--min-duration=30")
    args = parser.parse_args()
    args.model_dir = args.build / "models" / args.model
    if not (args.llama_cpp_bin / "llama-server").exists():
        sys.exit(f"compare_llama_server: no llama-server in {args.llama_cpp_bin}")
    for tool in ("baton", "baton_engine_bench"):
        if not (args.build / "bin" / tool).exists():
            sys.exit(f"compare_llama_server: no bin/{tool} in {args.build} (build it first)")
    if not (args.model_dir / "config.json").exists():
        sys.exit(f"compare_llama_server: no model at {args.model_dir} "
                 f"(scripts/make_checkpoint.py --shape {args.model} --out {args.model_dir})")
    if (args.slo_ttft is None or args.slo_tpot is None) and args.workload not in MEDIAN_PROMPT:
        sys.exit(f"compare_llama_server: give --slo-ttft and --slo-tpot for {args.workload}")
    if args.rounds < 1:
        sys.exit("compare_llama_server: --rounds must be at least 1")

    gguf = gguf_path(args.build, args.model, args.dtype)
    measured = unloaded_slos(args) if args.slo_ttft is None or args.slo_tpot is None else (0, 0)
    slos = (args.slo_ttft or measured[0], args.slo_tpot or measured[1])
    base = args.out or (ROOT / "benchmarks/results" / machine_tag() / f"{args.model}-{args.dtype}")
    labels = [baton_label(args, name) for name in args.deployments]
    table = ["| round | llama-server (req/s) | " + " | ".join(labels) + " |",
             "|---|---|" + "---|" * len(args.deployments)]
    workload = f"{args.workload}-x{args.multi_turn}turns" if args.multi_turn else args.workload
    experiment = base / f"{workload}-vs-llama-server"
    done = len(list(experiment.glob("round*"))) if experiment.exists() else 0
    for round_index in range(done + 1, done + args.rounds + 1):
        out = experiment / f"round{round_index}"
        out.mkdir(parents=True)
        theirs = llama_server(args, gguf, out, slos)
        ours = {baton_label(args, name): baton_server(args, name, out, slos)
                for name in args.deployments}
        row = {"round": round_index, "slo_ttft_ms": slos[0], "slo_tpot_ms": slos[1],
               "llama_server": theirs, "baton": ours}
        (out / "comparison.json").write_text(json.dumps(row, indent=2) + "\n")
        print(json.dumps(row), flush=True)
        table.append(f"| {round_index} | {theirs:.3g} | " + " | ".join(
            f"{g:.3g} ({g / theirs:.2f}x)" if theirs > 0 else f"{g:.3g}" for g in ours.values()) + " |")
    print(f"goodput, SLOs {slos[0]:.0f} ms / {slos[1]:.1f} ms\n" + "\n".join(table), file=sys.stderr)


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
