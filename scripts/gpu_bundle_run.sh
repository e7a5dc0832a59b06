#!/usr/bin/env bash
# run.sh of the GPU bundle (scripts/gpu_bundle.sh copies this file into it): on a machine with an
# NVIDIA GPU and driver, runs every `gpu` test case, then baton_gpu_bench, then the transformers
# baseline on the same shapes; results go under $OUT (default ./results next to this script).
#
#   ./run.sh                      # tests, then the Llama-3-8B-shaped benchmark and the baseline
#   ./run.sh --tests-only
#   ./run.sh --bench-only --layers 4          # flags after the mode go to both benchmarks
#   ./run.sh --no-baseline ...                # skip transformers_baseline.py
#
# Environment: OUT (results), BATON_CUDA_LIB_DIRS (extra ':'-separated directories to look for
# cuBLAS/cuBLASLt/NCCL in), BATON_BENCH_WORK_DIR (where the benchmark writes its generated checkpoint,
# 2 bytes per parameter: 16 GB for the default shape; default /tmp/baton_gpu_bench), PYTHON.
#
# Exit status: 0 when everything that ran passed; 3 no usable GPU (one line says why; nothing ran);
# 4 a library is missing (one line names it); 1 a test or benchmark failed (see $OUT/summary.txt).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$here/results}
mkdir -p "$OUT/tests"
work_dir=${BATON_BENCH_WORK_DIR:-/tmp/baton_gpu_bench}
python=${PYTHON:-python3}

run_tests=1 run_bench=1 run_baseline=1
bench_args=()
for arg in "$@"; do
  case "$arg" in
    --tests-only) run_bench=0 ;;
    --bench-only) run_tests=0 ;;
    --no-baseline) run_baseline=0 ;;
    *) bench_args+=("$arg") ;;
  esac
done

fail() { echo "run.sh: $2" | tee -a "$OUT/summary.txt" >&2; exit "$1"; }
: > "$OUT/summary.txt"

# Where the libraries not carried (NEEDS_FROM_TARGET) may be: the given directories, the CUDA
# toolkit, the ld.so cache, and the lib/ directories of PyTorch's nvidia-* wheels.
candidate_dirs() {
  tr ':' '\n' <<< "${BATON_CUDA_LIB_DIRS:-}"
  tr ':' '\n' <<< "${LD_LIBRARY_PATH:-}"
  [[ -n "${CUDA_HOME:-}" ]] && echo "$CUDA_HOME/lib64" && echo "$CUDA_HOME/lib"
  ls -d /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
    /usr/local/cuda-*/lib64 2>/dev/null
  /sbin/ldconfig -p 2>/dev/null | awk '/=>/ {print $NF}' | xargs -r -n1 dirname 2>/dev/null | sort -u
  if command -v "$python" >/dev/null; then
    "$python" - <<'EOF' 2>/dev/null
import glob, importlib.util, os
for name in ("nvidia", "torch"):
    spec = importlib.util.find_spec(name)
    for root in (spec.submodule_search_locations or []) if spec else []:
        for d in glob.glob(os.path.join(root, "*", "lib")) + [os.path.join(root, "lib")]:
            print(d)
EOF
  fi
}
lib_path="$here/lib"
missing=()
while read -r soname; do
  [[ -z "$soname" ]] && continue
  found=""
  while read -r dir; do
    if [[ -n "$dir" && -e "$dir/$soname" ]]; then found="$dir"; break; fi
  done < <(candidate_dirs)
  if [[ -n "$found" ]]; then
    [[ ":$lib_path:" == *":$found:"* ]] || lib_path="$lib_path:$found"
  elif [[ "$soname" != libcuda.so* && "$soname" != libnvidia-* ]]; then
    missing+=("$soname")
  fi
done < "$here/NEEDS_FROM_TARGET"
export LD_LIBRARY_PATH="$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "library path: $lib_path" >> "$OUT/summary.txt"
(( ${#missing[@]} )) && echo "not found on this machine: ${missing[*]}" >> "$OUT/summary.txt"

# Every binary starts through the bundled loader, against the bundled glibc (see gpu_bundle.sh).
run() { "$here/lib/ld-linux-x86-64.so.2" --library-path "$LD_LIBRARY_PATH" "$@"; }
# The sonames `exe` cannot resolve here.
unresolved() { run --list "$1" 2>&1 | awk '/not found/ {print $1}' | sort -u | tr '\n' ' '; }

bench_missing=$(unresolved "$here/bin/baton_gpu_bench")
if [[ -n "$bench_missing" ]]; then
  fail 4 "missing $bench_missing(built against $(grep '^cuda:' "$here/BUILD_INFO" | sed 's/^cuda: //')); set BATON_CUDA_LIB_DIRS to a directory holding them"
fi
command -v nvidia-smi >/dev/null && nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
if ! probe=$(run "$here/bin/baton_gpu_bench" --probe 2>&1); then
  fail 3 "no usable GPU, nothing run: $probe"
fi
echo "device: $probe" | tee -a "$OUT/summary.txt" >&2
cat "$here/BUILD_INFO" >> "$OUT/summary.txt"

status=0
if (( run_tests )); then
  while IFS=$'\t' read -r exe filter; do
    missing_libs=$(unresolved "$here/bin/$exe")
    if [[ -n "$missing_libs" ]]; then
      echo "tests $exe: NOT RUN, missing $missing_libs" | tee -a "$OUT/summary.txt" >&2
      status=1
      continue
    fi
    run "$here/bin/$exe" --gtest_filter="$filter" --gtest_output="xml:$OUT/tests/$exe.xml" \
      > "$OUT/tests/$exe.log" 2>&1
    rc=$?
    counts=$(grep -hoE '^\[  (PASSED|FAILED|SKIPPED) \] [0-9]+' "$OUT/tests/$exe.log" | tr -d '[]' \
      | awk '{printf "%s %s  ", $1, $2}')
    echo "tests $exe: rc $rc  $counts" | tee -a "$OUT/summary.txt" >&2
    (( rc == 0 )) || status=1
  done < "$here/tests.tsv"
  # A case that skips here (one GPU where a test needs two) says why in its log.
  grep -h -B1 '^\[  SKIPPED \] [A-Z]' "$OUT"/tests/*.log 2>/dev/null | grep -v '^\[\|^--' \
    | sort | uniq -c | sed 's/^/skip reason: /' >> "$OUT/summary.txt"
fi

if (( run_bench )); then
  echo "baton_gpu_bench ${bench_args[*]} (checkpoint in $work_dir)" >&2
  run "$here/bin/baton_gpu_bench" --work-dir "$work_dir" --out "$OUT/baton_gpu_bench.json" \
    "${bench_args[@]}" > /dev/null 2> "$OUT/baton_gpu_bench.log"
  rc=$?
  echo "baton_gpu_bench: rc $rc ($OUT/baton_gpu_bench.json)" | tee -a "$OUT/summary.txt" >&2
  (( rc == 0 )) || { status=1; tail -3 "$OUT/baton_gpu_bench.log" >&2; }
  if (( run_baseline )); then
    "$python" "$here/transformers_baseline.py" --out "$OUT/transformers.json" "${bench_args[@]}" \
      > /dev/null 2> "$OUT/transformers.log"
    rc=$?
    echo "transformers_baseline: rc $rc ($OUT/transformers.json)" | tee -a "$OUT/summary.txt" >&2
    (( rc == 0 )) || { status=1; tail -3 "$OUT/transformers.log" >&2; }
  fi
fi
exit "$status"
