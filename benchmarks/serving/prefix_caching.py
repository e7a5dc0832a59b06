#!/usr/bin/env python3
"""What prefix caching buys on the workloads that repeat prefixes (issue 38), caching on against off.

Two measurements, each alternating the two deployments round by round (on, off, on, off, ...) so a
slow minute of a shared machine is seen by both:

  shared-prefix  `baton bench --workload shared-prefix` (4 system prompts of 2,000 tokens, each
                 request one of them + a 32-token question, 16 tokens out) at a low rate against a
                 disaggregated 1 prefill + 1 decode deployment: TTFT p50 with and without caching.
  multi-turn     `baton bench goodput --workload chatbot --multi-turn 4` (ShareGPT turn lengths, 1 s
                 think time) against the deployments named by --deployments: goodput at the same
                 SLOs with and without caching.
  routing        the shared-prefix run with 8 system prompts against 2 prefill instances (KV-aware
                 routing) and against 1: the one instance is the oracle that always holds the
                 longest cached prefix (nothing is evicted from its 1 GiB), so the ratio of the two
                 hit rates is KV-aware routing's against the oracle's; and against 2 prefill
                 instances with `routing_policy: least_loaded`, which sees no cache.
  no-reuse       `baton bench goodput --workload chatbot` (single requests: no prefix repeats)
                 against 2 prefill instances + 1 decode with `routing_policy: kv_aware` and
                 `least_loaded`: what the cache-aware cost costs where there is nothing to reuse.

Prints one JSON object (every run's figures and the ratios); the runs' directories stay under --out.

    .venv/bin/python benchmarks/serving/prefix_caching.py --model build/models/tiny \\
        --slo-ttft 1000 --slo-tpot 50 --out /tmp/prefix-caching
"""
import argparse
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
PHASE = "threads: {threads}, kv_cache_bytes: 1GiB"
DEPLOYMENTS = {
    "disagg-1p1d": "prefill: {instances: 1, " + PHASE.format(threads=1) + "}\n"
                   "decode: {instances: 1, " + PHASE.format(threads=1) + "}\n",
    "disagg-1p1d-local256": "max_local_prefill_tokens: 256\n"
                            "prefill: {instances: 1, " + PHASE.format(threads=1) + "}\n"
                            "decode: {instances: 1, " + PHASE.format(threads=1) + "}\n",
    "disagg-2p1d": "prefill: {instances: 2, " + PHASE.format(threads=1) + "}\n"
                   "decode: {instances: 1, " + PHASE.format(threads=1) + "}\n",
    "coloc-1x2": "mode: colocated\ncolocated: {instances: 1, " + PHASE.format(threads=2) + "}\n",
    "coloc-1x2-chunked": "mode: colocated\ncolocated: {instances: 1, " + PHASE.format(threads=2)
                         + ", chunked_prefill: true, max_num_batched_tokens: 512}\n",
    "coloc-2x1": "mode: colocated\ncolocated: {instances: 2, " + PHASE.format(threads=1) + "}\n",
}


def free_port_block(n: int) -> int:
    for base in range(42000, 60000, 97):
        ok = True
        for port in range(base, base + n):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port block")


class Deployment:
    """`baton serve` of one deployment text, caching on or off, until stopped."""

    def __init__(self, baton: pathlib.Path, model: pathlib.Path, text: str, caching: bool, work: pathlib.Path,
                 weight_dtype: str):
        self.port = free_port_block(8)
        config = work / f"deployment-{self.port}.yaml"
        config.write_text(f"model: {model}\nweight_dtype: {weight_dtype}\nscheduler_port: {self.port}\nhttp_port: 0\n"
                          f"enable_prefix_caching: {str(caching).lower()}\n{text}")
        self.log = open(work / f"serve-{self.port}.log", "w")
        self.proc = subprocess.Popen([str(baton), "serve", "--config", str(config)], stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if "baton: serving" in (work / f"serve-{self.port}.log").read_text():
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"baton serve exited: see {self.log.name}")
            time.sleep(0.5)
        raise RuntimeError("baton serve did not start in 180 s")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()


def run_bench(baton, model, port, args: list[str], subcommand: tuple[str, ...] = ()) -> None:
    out = subprocess.run([str(baton), "bench", *subcommand, "--server", f"127.0.0.1:{port}", "--model", str(model),
                          "--no-progress", *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"baton bench exited {out.returncode}: {out.stderr[-2000:]}")


def shared_prefix_round(baton, model, deployment, work, rate, num_requests, num_prefixes=4) -> dict:
    summary = work / f"shared-prefix-{deployment.port}.json"
    run_bench(baton, model, deployment.port,
              ["--workload", "shared-prefix", "--prefix-repetition-prefix-len", "2000",
               "--prefix-repetition-suffix-len", "32", "--prefix-repetition-num-prefixes", str(num_prefixes),
               "--prefix-repetition-output-len", "16", "--rate", str(rate), "--num-requests", str(num_requests),
               "--warmup", "4", "--summary-json", str(summary)])
    s = json.loads(summary.read_text())
    return {"ttft_p50_ms": s["ttft_s"]["p50"] * 1e3, "ttft_p90_ms": s["ttft_s"]["p90"] * 1e3,
            "tpot_p50_ms": s["tpot_s"]["p50"] * 1e3, "prefix_hit_rate": s.get("prefix_hit_rate")}


def chatbot_round(baton, model, deployment, out_dir, slo_ttft, slo_tpot, search_args, turns=1) -> dict:
    sessions = ["--multi-turn", str(turns), "--think-time", "1"] if turns > 1 else []
    run_bench(baton, model, deployment.port,
              ["--workload", "chatbot", *sessions,
               "--slo-ttft", str(slo_ttft), "--slo-tpot", str(slo_tpot), "--output-dir", str(out_dir),
               *search_args], subcommand=("goodput",))
    result = json.loads((out_dir / "goodput.json").read_text())
    runs = result.get("runs", [])
    hit_rates = [r["summary"].get("prefix_hit_rate") for r in runs if r.get("summary")]
    return {"goodput_per_s": result["goodput_per_s"],
            "runs": [(r["rate_per_s"], r["attainment"]) for r in runs],
            "prefix_hit_rate": max((h for h in hit_rates if h is not None), default=None)}


def fixed_rate_round(baton, model, deployment, work, slo_ttft, slo_tpot, rate, num_requests) -> dict:
    """One open-loop `baton bench` run of single-turn chatbot requests at `rate`: its attainment."""
    summary = work / f"fixed-rate-{deployment.port}.json"
    run_bench(baton, model, deployment.port,
              ["--workload", "chatbot", "--rate", str(rate), "--num-requests", str(num_requests),
               "--warmup", "4", "--slo-ttft", str(slo_ttft), "--slo-tpot", str(slo_tpot), "--summary-json", str(summary)])
    s = json.loads(summary.read_text())
    return {"rate_per_s": rate, "attainment": s["attainment"], "ttft_p90_ms": s["ttft_s"]["p90"] * 1e3,
            "tpot_p90_ms": s["tpot_s"]["p90"] * 1e3}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baton", type=pathlib.Path, default=ROOT / "build/bin/baton")
    parser.add_argument("--model", type=pathlib.Path, default=ROOT / "build/models/tiny")
    parser.add_argument("--weight-dtype", default="f32", choices=["f32", "bf16"])
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("/tmp/prefix-caching"))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--skip", choices=["shared-prefix", "multi-turn", "routing", "no-reuse"], action="append",
                        default=[])
    parser.add_argument("--no-reuse-rates", default="",
                        help="comma-separated rates: no-reuse runs open-loop at each (attainment per "
                             "policy, finer than a search) instead of a goodput search")
    parser.add_argument("--no-reuse-requests", type=int, default=60)
    parser.add_argument("--shared-prefix-rate", type=float, default=1.0)
    parser.add_argument("--shared-prefix-requests", type=int, default=40)
    parser.add_argument("--deployments", default="coloc-1x2,disagg-1p1d")
    parser.add_argument("--slo-ttft", type=float, default=1000.0)
    parser.add_argument("--slo-tpot", type=float, default=50.0)
    parser.add_argument("--search", default="--min-duration 20 --min-requests 30 --max-runs 5 "
                                            "--initial-rate 0.25 --tolerance 0.15",
                        help="more `baton bench goodput` flags")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    model = args.model.resolve()
    report = {"shared_prefix": {"on": [], "off": []}, "multi_turn": {},
              "routing": {"2p1d": [], "1p1d": [], "2p1d-least-loaded": []},
              "no_reuse": {"kv_aware": [], "least_loaded": []}}

    def with_deployment(text, caching, fn):
        deployment = Deployment(args.baton, model, text, caching, args.out, args.weight_dtype)
        try:
            return fn(deployment)
        finally:
            deployment.stop()

    for r in range(args.rounds):
        if "shared-prefix" not in args.skip:
            for caching in (True, False):
                figures = with_deployment(DEPLOYMENTS["disagg-1p1d"], caching, lambda d: shared_prefix_round(
                    args.baton, model, d, args.out, args.shared_prefix_rate, args.shared_prefix_requests))
                report["shared_prefix"]["on" if caching else "off"].append(figures)
                print(f"round {r} shared-prefix caching={caching}: {figures}", file=sys.stderr)
        if "routing" not in args.skip:
            for name, key in (("disagg-2p1d", "2p1d"), ("disagg-1p1d", "1p1d"),
                              ("disagg-2p1d", "2p1d-least-loaded")):
                text = DEPLOYMENTS[name] + ("routing_policy: least_loaded\n" if "least" in key else "")
                figures = with_deployment(text, True, lambda d: shared_prefix_round(
                    args.baton, model, d, args.out, args.shared_prefix_rate, 3 * args.shared_prefix_requests,
                    num_prefixes=8))
                report["routing"][key].append(figures)
                print(f"round {r} routing {name}: {figures}", file=sys.stderr)
        if "no-reuse" not in args.skip:
            for policy in ("kv_aware", "least_loaded"):
                out_dir = args.out / f"no-reuse-{policy}-round{r}"
                text = DEPLOYMENTS["disagg-2p1d"] + f"routing_policy: {policy}\n"
                if args.no_reuse_rates:
                    figures = with_deployment(text, True, lambda d: [fixed_rate_round(
                        args.baton, model, d, args.out, args.slo_ttft, args.slo_tpot, float(rate),
                        args.no_reuse_requests) for rate in args.no_reuse_rates.split(",")])
                else:
                    figures = with_deployment(text, True, lambda d: chatbot_round(
                        args.baton, model, d, out_dir, args.slo_ttft, args.slo_tpot, args.search.split()))
                report["no_reuse"][policy].append(figures)
                print(f"round {r} no-reuse {policy}: {figures}", file=sys.stderr)
        if "multi-turn" not in args.skip:
            for name in args.deployments.split(","):
                for caching in (True, False):
                    out_dir = args.out / f"multi-turn-{name}-{'on' if caching else 'off'}-round{r}"
                    figures = with_deployment(DEPLOYMENTS[name], caching, lambda d: chatbot_round(
                        args.baton, model, d, out_dir, args.slo_ttft, args.slo_tpot, args.search.split(), turns=4))
                    report["multi_turn"].setdefault(name, {"on": [], "off": []})["on" if caching else "off"].append(figures)
                    print(f"round {r} multi-turn {name} caching={caching}: {figures}", file=sys.stderr)
    shared = report["shared_prefix"]
    if shared["on"] and shared["off"]:
        report["shared_prefix"]["ttft_p50_ratio_off_over_on"] = [
            off["ttft_p50_ms"] / on["ttft_p50_ms"] for on, off in zip(shared["on"], shared["off"])]
    routing = report["routing"]
    if routing["2p1d"] and routing["1p1d"]:
        routing["hit_rate_ratio_to_oracle"] = [
            a["prefix_hit_rate"] / b["prefix_hit_rate"] for a, b in zip(routing["2p1d"], routing["1p1d"])]
    if routing["2p1d-least-loaded"] and routing["1p1d"]:
        routing["least_loaded_hit_rate_ratio_to_oracle"] = [
            a["prefix_hit_rate"] / b["prefix_hit_rate"] for a, b in zip(routing["2p1d-least-loaded"], routing["1p1d"])]
    no_reuse = report["no_reuse"]
    if no_reuse["kv_aware"] and args.no_reuse_rates:
        # Fixed rates: each round is a list of runs; the mean attainment per rate and policy.
        no_reuse["mean_attainment"] = {
            policy: {str(run["rate_per_s"]): sum(r[i]["attainment"] for r in rounds) / len(rounds)
                     for i, run in enumerate(rounds[0])}
            for policy, rounds in (("kv_aware", no_reuse["kv_aware"]),
                                   ("least_loaded", no_reuse["least_loaded"]))}
    elif no_reuse["kv_aware"] and no_reuse["least_loaded"]:
        no_reuse["goodput_ratio_kv_aware_over_least_loaded"] = [
            a["goodput_per_s"] / b["goodput_per_s"] if b["goodput_per_s"] else None
            for a, b in zip(no_reuse["kv_aware"], no_reuse["least_loaded"])]
    for name, result in report["multi_turn"].items():
        result["goodput_ratio_on_over_off"] = [
            (on["goodput_per_s"] or 0) / off["goodput_per_s"]
            if off["goodput_per_s"] else None for on, off in zip(result["on"], result["off"])]
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
