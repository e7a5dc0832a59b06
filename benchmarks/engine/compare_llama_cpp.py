#!/usr/bin/env python3
"""baton_engine_bench next to llama.cpp on the same checkpoints, machine and minute.

For each row (tiny/small x f32/bf16 x 1/2 threads; --dtypes i8 fp8 i4 sets Baton's int8, fp8 and
int4 quantized at load against llama.cpp's Q8_0, Q8_0 and Q4_0) it runs baton_engine_bench, then llama.cpp's
llama-bench (prefill of a 512-token prompt) and llama-batched-bench (decode at batch 1, 8 and 32
after a 128-token prompt, and at batch 1 and 8 after a --long-context (2000) token one, 32 steps:
what baton_engine_bench times), one right after the other so
both see the same machine, and repeats that pair --pairs times. A shared VM's speed drifts by tens
of percent from one minute to the next, so each ratio reported is the median of the ratios taken
within a pair, and each engine's figure the median over its runs. llama.cpp's batch-1 decode is
also put over the read bandwidth baton measured in the same pair, so the two roofline shares can be
compared.

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


# Baton's quantized weight dtypes and the llama.cpp type each is set against: llama-quantize's
# Q8_0 (int8 in blocks of 32, an f16 scale each) and Q4_0 (4 bits in blocks of 32), made from the
# bf16 GGUF. llama-quantize keeps output.weight at Q6_K for Q4_0 (its default), as Baton's int4
# keeps lm_head at int8. llama.cpp has no fp8 type: Baton's fp8 meets Q8_0, the byte-per-weight
# format its users run.
LLAMA_CPP_TYPES = {"i8": "Q8_0", "fp8": "Q8_0", "i4": "Q4_0"}


def gguf_path(build: pathlib.Path, model: str, dtype: str, bin_dir: pathlib.Path) -> pathlib.Path:
    path = build / "gguf" / f"{model}-{dtype}.gguf"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        if dtype in LLAMA_CPP_TYPES:
            source = gguf_path(build, model, "bf16", bin_dir)
            subprocess.run([str(bin_dir / "llama-quantize"), str(source), str(path),
                            LLAMA_CPP_TYPES[dtype]], check=True, capture_output=True)
            return path
        subprocess.run([sys.executable, str(ROOT / "benchmarks/engine/hf_to_gguf.py"),
                        str(build / "models" / model), str(path), "--dtype", dtype], check=True)
    return path


LONG_BATCHES = ("1", "8")


def llama_cpp_run(bin_dir: pathlib.Path, gguf: pathlib.Path, threads: int, long_context: int) -> dict:
    bench = run_json_lines([str(bin_dir / "llama-bench"), "-m", str(gguf), "-p", "512", "-n", "0",
                            "-t", str(threads), "-r", "3", "-o", "jsonl"])
    batched = [str(bin_dir / "llama-batched-bench"), "-m", str(gguf), "-b", "2048", "-ub", "512",
               "-ntg", "32", "-t", str(threads), "--output-format", "jsonl"]
    # Without --kv-unified every sequence gets a KV stream of its own, -c / max(-npl) cells long.
    decode = {str(r["pl"]): r["speed_tg"]
              for r in run_json_lines(batched + ["-c", "8192", "-npp", "128", "-npl", "1,8,32"])}
    # Best of 3, as baton_engine_bench's prefill.
    result = {"prefill_tokens_per_s": max(bench[0]["samples_ts"]), "decode_tokens_per_s": decode}
    if long_context > 0:
        # -pps prefills the prompt once and copies its KV into each sequence's own stream, so the
        # decode steps read 8 separate contexts, as Baton's 8 distinct prompts, without 8 prefills.
        per_seq = long_context + 48
        result["decode_long_tokens_per_s"] = {str(r["pl"]): r["speed_tg"] for r in run_json_lines(
            batched + ["-c", str(per_seq * int(LONG_BATCHES[-1])), "-npp", str(long_context), "-pps",
                       "-npl", ",".join(LONG_BATCHES)])}
    return result


# (name, getter) of every figure a row compares.
METRICS = [("prefill", lambda r: r["prefill_tokens_per_s"])] + [
    (f"decode{b}", lambda r, b=b: r["decode_tokens_per_s"][b]) for b in ("1", "8", "32")] + [
    ("decode1_share", lambda r: r["decode1_share_of_roofline"])]
LONG_METRICS = [(f"decode{b}_long", lambda r, b=b: r["decode_long_tokens_per_s"][b])
                for b in LONG_BATCHES]


def compare_row(args, model: str, dtype: str, threads: int) -> dict:
    gguf = gguf_path(args.build, model, dtype, args.llama_cpp_bin)
    metrics = METRICS + (LONG_METRICS if args.long_context > 0 else [])
    pairs = []
    for _ in range(args.pairs):
        ours = run_json_lines([str(args.build / "bin/baton_engine_bench"), "--model",
                               str(args.build / "models" / model), "--dtype", dtype,
                               "--threads", str(threads), "--rounds", "1",
                               "--long-context-len", str(args.long_context),
                               "--long-batches", *LONG_BATCHES])[0]
        theirs = llama_cpp_run(args.llama_cpp_bin, gguf, threads, args.long_context)
        theirs["decode1_share_of_roofline"] = (theirs["decode_tokens_per_s"]["1"]
                                               * ours["decode_bytes_per_token"]
                                               / (ours["read_bandwidth_GBs"] * 1e9))
        pairs.append({"baton": ours, "llama_cpp": theirs})
    median = statistics.median
    return {"model": model, "dtype": dtype, "threads": threads, "long_context": args.long_context,
            "pairs": pairs,
            "baton": {name: median([get(p["baton"]) for p in pairs]) for name, get in metrics},
            "llama_cpp": {name: median([get(p["llama_cpp"]) for p in pairs]) for name, get in metrics},
            "ratio": {name: median([get(p["baton"]) / get(p["llama_cpp"]) for p in pairs])
                      for name, get in metrics}}


def table_line(row: dict) -> str:
    ours, theirs, ratio = row["baton"], row["llama_cpp"], row["ratio"]
    names = ["prefill", "decode1", "decode8", "decode32"] + [
        name for name, _ in LONG_METRICS if name in ratio]
    cells = [f"{ours[name]:.3g} / {theirs[name]:.3g} ({ratio[name]:.2f}x)" for name in names]
    cells.append(f"{ours['decode1_share']:.2f} / {theirs['decode1_share']:.2f}")
    return f"| {row['model']} | {row['dtype']} | {row['threads']} | " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-cpp-bin", type=pathlib.Path, required=True,
                        help="directory holding llama-bench and llama-batched-bench")
    parser.add_argument("--build", type=pathlib.Path, default=ROOT / "build")
    parser.add_argument("--pairs", type=int, default=5,
                        help="baton then llama.cpp runs per row, alternating")
    parser.add_argument("--models", nargs="+", default=["tiny", "small"])
    parser.add_argument("--dtypes", nargs="+", default=["f32", "bf16"],
                        choices=["f32", "bf16", "i8", "fp8", "i4"],
                        help="i8 / fp8 / i4: Baton's int8 / fp8 / int4 at load against llama.cpp's "
                             "Q8_0 / Q8_0 / Q4_0")
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--long-context", type=int, default=2000,
                        help="prompt tokens before the long-context decode rows (0: none)")
    args = parser.parse_args()
    if args.pairs < 1:
        sys.exit("compare_llama_cpp: --pairs must be at least 1")
    if not 0 <= args.long_context <= 2000:
        sys.exit("compare_llama_cpp: --long-context must be in [0, 2000] (max_model_len 2048)")
    tools = ["llama-bench", "llama-batched-bench"]
    if any(dtype in LLAMA_CPP_TYPES for dtype in args.dtypes):
        tools.append("llama-quantize")
    for tool in tools:
        if not (args.llama_cpp_bin / tool).exists():
            sys.exit(f"compare_llama_cpp: no {tool} in {args.llama_cpp_bin}")
    if not (args.build / "bin/baton_engine_bench").exists():
        sys.exit(f"compare_llama_cpp: no bin/baton_engine_bench in {args.build} (build it first)")

    long_header = "".join(f"| decode b={b} at {args.long_context} " for b in LONG_BATCHES
                          ) if args.long_context > 0 else ""
    table = ["| model | weights | threads | prefill tok/s (512) | decode b=1 | decode b=8 | decode b=32 "
             + long_header + "| b=1 share of roofline |",
             "|---|---|---|---|---|---|---|---|" + ("---|" * len(LONG_BATCHES) if long_header else "")]
    for model in args.models:
        for dtype in args.dtypes:
            for threads in args.threads:
                row = compare_row(args, model, dtype, threads)
                print(json.dumps(row), flush=True)
                table.append(table_line(row))
    print("baton / llama.cpp (median of per-pair ratios)\n" + "\n".join(table), file=sys.stderr)


if __name__ == "__main__":
    main()
