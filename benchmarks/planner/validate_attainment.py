#!/usr/bin/env python3
"""The planner's predicted SLO attainment next to the attainment `baton bench` measures.

For each deployment x workload x rate it serves the deployment (`baton serve --config`), sends
`baton bench --rate R --num-requests N --seed S` at it, then asks `baton plan --deployment CONFIG
--rate R` with the same N and seed (so the simulation sees the very requests bench sent, with the same
warm-up left out) and prints both side by side as a Markdown table.

    .venv/bin/python benchmarks/planner/validate_attainment.py measure --out /tmp/val
    .venv/bin/python benchmarks/planner/validate_attainment.py predict --out /tmp/val \
        --coefficients tiny.json [--coefficients tiny-calibrated.json]

`measure` keeps each run's records (<out>/<deployment>-<workload>-<rate>.jsonl), bench's summary and
the workers' step traces (<out>/<stem>.traces/, for `baton plan calibrate --step-traces`), so
`predict` can be rerun with other coefficients in seconds. With --multi-turn N the workloads run as
conversations of N turns (--think-time seconds apart, each turn's prompt the whole history), bench
and plan alike; rates then count conversations and the cells are named <workload>-x<N>turns. Run `measure` on an otherwise
idle machine: the deployments use every core, and anything else running is read as serving time.
"""
import argparse
import json
import pathlib
import re
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]

# One core per engine, as the planner's cpu device is one core.
DEPLOYMENTS = {
    "disagg-1p1d": "prefill: {instances: 1, threads: 1}\ndecode: {instances: 1, threads: 1}\n",
    "coloc-2x1": "mode: colocated\ncolocated: {instances: 2, threads: 1}\n",
}
# The SLOs of benchmarks/RESULTS.md's zen4 tiny comparison (5x the unloaded prefill and decode step).
WORKLOADS = {"chatbot": (455.0, 15.5), "summarization": (3030.0, 25.0)}
# Req/s, from well inside capacity to past the knee (summarization's knee is further out: its long
# prompts queue only on the prefill core, and decode batches stay small).
RATES = {"chatbot": [0.5, 1.0, 1.5], "summarization": [0.5, 1.0, 1.5, 2.0]}


def baton(build: pathlib.Path) -> str:
    return str(build / "bin" / "baton")


def config_file(out: pathlib.Path, name: str, model: pathlib.Path, port: int) -> pathlib.Path:
    path = out / f"{name}.yaml"
    path.write_text(f"model: {model}\nscheduler_port: {port}\nhttp_port: 0\n" + DEPLOYMENTS[name])
    return path


def measure_one(args, config: pathlib.Path, port: int, workload: str, rate: float, stem: str) -> None:
    ttft_ms, tpot_ms = WORKLOADS[workload]
    with tempfile.TemporaryFile("w+") as log:
        serve = subprocess.Popen([baton(args.build), "serve", "--config", str(config),
                                  "--step-trace-dir", str(args.out / f"{stem}.traces")], stdout=log,
                                 stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 60
            while True:
                log.seek(0)
                if any(line.startswith("baton: serving") for line in log):
                    break
                if serve.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    sys.exit(f"validate_attainment: baton serve did not start:\n{log.read()[-2000:]}")
                time.sleep(0.2)
            bench = subprocess.run(
                [baton(args.build), "bench", "--server", f"127.0.0.1:{port}", "--model", str(args.model),
                 "--workload", workload, "--rate", str(rate), "--num-requests", str(args.num_requests),
                 "--seed", str(args.seed), "--slo-ttft", str(ttft_ms), "--slo-tpot", str(tpot_ms),
                 "--no-progress", "--output", str(args.out / f"{stem}.jsonl"), *session_args(args)],
                capture_output=True, text=True, timeout=3600)
        finally:
            serve.terminate()
            serve.wait(timeout=60)
    if bench.returncode != 0:
        sys.exit(f"validate_attainment: bench failed for {stem}:\n{bench.stderr[-2000:]}")
    (args.out / f"{stem}.bench.txt").write_text(bench.stdout + bench.stderr)


def measured_attainment(path: pathlib.Path, slo_scale: float) -> float:
    """Bench's attainment at the workload's SLOs times slo_scale (its summary sweeps a few scales)."""
    text = path.read_text()
    if slo_scale == 1:
        match = re.search(r"^SLO attainment: ([0-9.]+)%", text, re.M)
    else:
        sweep = re.search(r"^  SLO scale: (.*)$", text, re.M)
        match = sweep and re.search(rf"(?:^| ){slo_scale:g}x ([0-9.]+)%", sweep.group(1))
    if not match:
        sys.exit(f"validate_attainment: no attainment at SLO scale {slo_scale:g} in {path} (bench sweeps "
                 "0.5, 0.75, 1, 1.25, 1.5, 2, 2.5, 3)")
    return float(match.group(1))


def predicted(args, config: pathlib.Path, workload: str, rate: float, coefficients: str) -> dict:
    ttft_ms, tpot_ms = (slo * args.slo_scale for slo in WORKLOADS[workload])
    proc = subprocess.run(
        [baton(args.build), "plan", "--model", str(args.model), "--device", "cpu", "--dtype", args.dtype,
         "--workload", workload, "--slo-ttft", str(ttft_ms / 1e3), "--slo-tpot", str(tpot_ms / 1e3),
         "--coefficients", coefficients, "--deployment", str(config), "--rate", str(rate),
         "--num-requests", str(args.num_requests), "--seed", str(args.seed), "--json", *session_args(args)],
        capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"validate_attainment: baton plan failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def session_args(args) -> list[str]:
    return ["--multi-turn", str(args.multi_turn), "--think-time", str(args.think_time)] if args.multi_turn else []


def cells(args):
    turns = f"-x{args.multi_turn}turns" if args.multi_turn else ""
    for d, name in enumerate(DEPLOYMENTS):
        for workload in WORKLOADS:
            for rate in RATES[workload]:
                stem = f"{name}-{workload}{turns}-{rate}"
                if args.only in stem:
                    yield name, 52400 + 10 * d, workload, rate, stem


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["measure", "predict"])
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--build", type=pathlib.Path, default=ROOT / "build")
    parser.add_argument("--model", type=pathlib.Path, default=ROOT / "build/models/tiny")
    parser.add_argument("--dtype", default="f32")
    parser.add_argument("--num-requests", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--multi-turn", type=int, default=0, help="turns per conversation (0: single requests)")
    parser.add_argument("--think-time", type=float, default=1.0, help="--multi-turn: seconds between turns")
    parser.add_argument("--rates", action="append", default=[], metavar="WORKLOAD=R1,R2,...",
                        help="the rates of a workload instead of the defaults (a faster machine's knee "
                             "lies further out)")
    parser.add_argument("--only", default="",
                        help="only the cells whose name (DEPLOYMENT-WORKLOAD-RATE) contains this")
    parser.add_argument("--coefficients", action="append", default=[],
                        help="predict: latency coefficients (repeat for one column each)")
    parser.add_argument("--slo-scale", type=float, default=1.0,
                        help="predict: score both sides at the workload's SLOs times this (one of the "
                             "scales bench's summary sweeps), to put a grid's knee inside it")
    args = parser.parse_args()
    for spec in args.rates:
        workload, _, rates = spec.partition("=")
        if workload not in WORKLOADS or not rates:
            sys.exit(f"validate_attainment: --rates {spec}: want WORKLOAD=R1,R2,... with WORKLOAD one of "
                     f"{', '.join(WORKLOADS)}")
        RATES[workload] = [float(r) for r in rates.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    args.model = args.model.resolve()
    if args.step == "measure":
        for name, port, workload, rate, stem in cells(args):
            if (args.out / f"{stem}.bench.txt").exists():
                continue  # resumable: a finished cell is kept
            print(f"measuring {stem}", file=sys.stderr, flush=True)
            measure_one(args, config_file(args.out, name, args.model, port), port, workload, rate, stem)
        return
    if not args.coefficients:
        sys.exit("validate_attainment: predict needs --coefficients")
    header = "| deployment | workload | rate (req/s) | measured | " + " | ".join(
        f"predicted ({pathlib.Path(c).name})" for c in args.coefficients) + " |"
    print(header)
    print("|" + "---|" * (4 + len(args.coefficients)))
    for name, port, workload, rate, stem in cells(args):
        bench = args.out / f"{stem}.bench.txt"
        if not bench.exists():
            continue
        measured = measured_attainment(bench, args.slo_scale)
        config = config_file(args.out, name, args.model, port)
        row = [name, workload, f"{rate:g}", f"{measured:.1f}%"]
        for c in args.coefficients:
            p = 100 * predicted(args, config, workload, rate, c)["predicted_attainment"]
            row.append(f"{p:.1f}% ({p - measured:+.1f})")
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
