#!/usr/bin/env python3
"""Per-GPU goodput of a deployment as DistServe's Figure 8 reads it: the rate where SLO attainment
crosses the target, interpolated linearly between the two grid rates around the first crossing
(DistServe's `find_intersection` in evaluation/2-benchmark-serving/plot.ipynb), one value per seed.

    goodput.py --baton build/bin/baton --gpus 3 --rates 2:8:0.25 --seeds 0,1,2,3 -- \
        --model opt-13b --device a100 --deployment opt-13b.yaml --num-requests 300 --warmup 0 \
        --slo-ttft 0.25 --slo-tpot 0.1

Everything after `--` goes to `baton plan` as is (it must name --deployment); --rate, --seed and
--json are added here. Runs one `baton plan` at a time.
"""
import argparse
import json
import subprocess
import sys


def attainment(baton, plan_args, rate, seed):
    out = subprocess.run([baton, "plan", *plan_args, "--rate", str(rate), "--seed", str(seed), "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["predicted_attainment"]


def main():
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser()
    parser.add_argument("--baton", default="build/bin/baton")
    parser.add_argument("--gpus", type=int, required=True, help="GPUs of the deployment")
    parser.add_argument("--rates", required=True, help="FIRST:LAST:STEP, cluster req/s")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--target", type=float, default=0.9)
    args = parser.parse_args(argv[:split])
    plan_args = argv[split + 1:]
    first, last, step = (float(x) for x in args.rates.split(":"))
    rates = [round(first + i * step, 6) for i in range(int(round((last - first) / step)) + 1)]
    for seed in (int(s) for s in args.seeds.split(",")):
        prev = None
        crossing = None
        for rate in rates:
            a = attainment(args.baton, plan_args, rate, seed)
            if prev is not None and prev[1] >= args.target > a:
                crossing = prev[0] + (args.target - prev[1]) * (rate - prev[0]) / (a - prev[1])
                break
            if prev is None and a < args.target:
                break  # below the target already at the first rate
            prev = (rate, a)
        if crossing is None:
            where = f"above {rates[-1]}" if prev is not None and prev[0] == rates[-1] else f"below {rates[0]}"
            print(f"seed {seed}: crossing {where} req/s")
        else:
            print(f"seed {seed}: {crossing:.3f} req/s, {crossing / args.gpus:.3f} per GPU")


if __name__ == "__main__":
    main()
