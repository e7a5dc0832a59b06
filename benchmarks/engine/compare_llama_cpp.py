#!/usr/bin/env python3
"""baton_engine_bench next to llama.cpp on the same checkpoints, machine and minute.

For each row (tiny/small x f32/bf16 x 1/2 threads) it runs baton_engine_bench, then llama.cpp's
llama-bench (prefill of a 512-token prompt) and llama-batched-bench (decode at batch 1, 8 and 32
after a 128-token prompt, 32 steps: what baton_engine_bench times), one right after the other so
both see the same machine. llama.cpp's batch-1 decode is also put over the read bandwidth baton
measured in that row, so the two roofline shares can be compared.

    .venv/bin/python benchmarks/engine/compare_llama_cpp.py --llama-cpp-bin /path/to/llama.cpp/build/bin

llama.cpp is not a dependency of Baton and is not built by this repository; see benchmarks/README.md
for one way to build it here. Checkpoints are converted to GGUF with hf_to_gguf.py (cached under
<build>/gguf). Prints one JSON object per row on stdout and a Markdown table on stderr.
"""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run_json_lines(cmd: list[str]) -> list[dict]:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"compare_llama_cpp: {' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def gguf_path(build: pathlib.Path, model: str, dtype: str) -> pathlib.Path:
    path = build / "gguf" / f"{model}-{dtype}.gguf"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(ROOT / "benchmarks/engine/hf_to_gguf.py"),
                        str(build / "models" / model), str(path), "--dtype", dtype], check=True)
    return path


def llama_cpp_row(bin_dir: pathlib.Path, gguf: pathlib.Path, threads: int, repeats: int) -> dict:
    bench = run_json_lines([str(bin_dir / "llama-bench"), "-m", str(gguf), "-p", "512", "-n", "0",
                            "-t", str(threads), "-r", str(repeats), "-o", "jsonl"])
    prefill = max(bench[0]["samples_ts"])
    batched = [str(bin_dir / "llama-batched-bench"), "-m", str(gguf), "-c", "8192", "-b", "2048",
               "-ub", "512", "-npp", "128", "-ntg", "32", "-t", str(threads), "--output-format", "jsonl"]
    decode1 = [run_json_lines(batched + ["-npl", "1"])[0]["speed_tg"] for _ in range(repeats)]
    wide = {r["pl"]: r["speed_tg"] for r in run_json_lines(batched + ["-npl", "8,32"])}
    return {"prefill_tokens_per_s": prefill,
            "decode_tokens_per_s": {"1": statistics.median(decode1), "8": wide[8], "32": wide[32]}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-cpp-bin", type=pathlib.Path, required=True,
                        help="directory holding llama-bench and llama-batched-bench")
    parser.add_argument("--build", type=pathlib.Path, default=ROOT / "build")
    parser.add_argument("--rounds", type=int, default=3, help="baton_engine_bench --rounds; llama.cpp repeats")
    parser.add_argument("--models", nargs="+", default=["tiny", "small"])
    parser.add_argument("--dtypes", nargs="+", default=["f32", "bf16"])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    args = parser.parse_args()
    for tool in ("llama-bench", "llama-batched-bench"):
        if not (args.llama_cpp_bin / tool).exists():
            sys.exit(f"compare_llama_cpp: no {tool} in {args.llama_cpp_bin}")
    if not (args.build / "bin/baton_engine_bench").exists():
        sys.exit(f"compare_llama_cpp: no bin/baton_engine_bench in {args.build} (build it first)")

    table = ["| model | weights | threads | prefill tok/s (512) | decode b=1 | decode b=8 | decode b=32 "
             "| b=1 share of roofline |", "|---|---|---|---|---|---|---|---|"]
    for model in args.models:
        for dtype in args.dtypes:
            gguf = gguf_path(args.build, model, dtype)
            for threads in args.threads:
                ours = run_json_lines([str(args.build / "bin/baton_engine_bench"), "--model",
                                       str(args.build / "models" / model), "--dtype", dtype,
                                       "--threads", str(threads), "--rounds", str(args.rounds)])[0]
                theirs = llama_cpp_row(args.llama_cpp_bin, gguf, threads, args.rounds)
                theirs["decode1_share_of_roofline"] = (theirs["decode_tokens_per_s"]["1"]
                                                       * ours["decode_bytes_per_token"]
                                                       / (ours["read_bandwidth_GBs"] * 1e9))
                row = {"model": model, "dtype": dtype, "threads": threads, "baton": ours, "llama_cpp": theirs}
                print(json.dumps(row), flush=True)

                def cell(get):
                    a, b = get(ours), get(theirs)
                    return f"{a:.3g} / {b:.3g} ({a / b:.2f}x)"
                cells = [cell(lambda r: r["prefill_tokens_per_s"])]
                cells += [cell(lambda r, b=b: r["decode_tokens_per_s"][b]) for b in ("1", "8", "32")]
                cells.append(f"{ours['decode1_share_of_roofline']:.2f} / "
                             f"{theirs['decode1_share_of_roofline']:.2f}")
                table.append(f"| {model} | {dtype} | {threads} | " + " | ".join(cells) + " |")
    print("baton / llama.cpp (ratio)\n" + "\n".join(table), file=sys.stderr)


if __name__ == "__main__":
    main()
