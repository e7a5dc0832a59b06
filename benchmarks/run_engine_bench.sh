#!/usr/bin/env bash
# Engine throughput on the CPU backend: tiny and small, f32 and bf16 weights, 1 and 2 threads.
# One JSON line per configuration (see benchmarks/engine/engine_bench.cc for the fields).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BATON_BUILD_DIR:-build}
.venv/bin/python scripts/make_checkpoint.py --all "$BUILD/models" >&2
for model in tiny small; do
  for dtype in f32 bf16; do
    for threads in 1 2; do
      "$BUILD/bin/baton_engine_bench" --model "$BUILD/models/$model" --dtype "$dtype" --threads "$threads"
    done
  done
done
