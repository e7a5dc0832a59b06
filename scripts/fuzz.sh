#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang into build-fuzz/ (BATON_FUZZ=ON: ASan, UBSan,
# no CUDA, only what the targets link) and runs each one for N seconds on a scratch copy of its
# corpus (tests/fuzz/corpus/<thing>/), so a run never writes into the tree. Prints one line per
# target; exits 1 naming the target and its crash file (kept under build-fuzz/crashes/) when one
# crashes, leaks, times out or runs out of memory. tests/fuzz/README.md says how to run longer.
#
#   scripts/fuzz.sh [--seconds N] [target...]    N defaults to 30; targets: tokenizer, safetensors, ...
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=30
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --seconds=*) seconds="${1#--seconds=}"; shift ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  for dir in tests/fuzz/corpus/*/; do targets+=("$(basename "$dir")"); done
fi

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DBATON_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "${launcher[@]}" >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target baton_fuzz >/dev/null

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
failed=0
for thing in "${targets[@]}"; do
  binary="build-fuzz/tests/fuzz/${thing}_fuzz"
  work="$scratch/$thing"
  mkdir -p "$work/corpus" "$work/artifacts"
  cp tests/fuzz/corpus/"$thing"/* "$work/corpus/"
  # -timeout: seconds per input; -rss_limit_mb also caps a single allocation (malloc_limit_mb).
  status=0
  "$binary" "$work/corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$work/artifacts/" -print_final_stats=1 >"$work/log" 2>&1 || status=$?
  stat() { sed -n "s/^stat::$1: *//p" "$work/log" | tail -1; }
  # Coverage in edges: when the seed corpus was loaded, and at the end.
  initial_cov="$(sed -n 's/.*INITED cov: \([0-9]*\).*/\1/p' "$work/log" | head -1)"
  final_cov="$(grep -o 'cov: [0-9]*' "$work/log" | tail -1 | cut -d' ' -f2)"
  new_cov="?"
  if [ -n "$initial_cov" ] && [ -n "$final_cov" ]; then new_cov="+$((final_cov - initial_cov))"; fi
  printf 'fuzz %-18s %9s runs %7s exec/s  cov %5s (%s new)  %5s units added\n' "$thing" \
    "$(stat number_of_executed_units)" "$(stat average_exec_per_sec)" "${final_cov:-?}" \
    "$new_cov" "$(stat new_units_added)"
  if [ "$status" -ne 0 ]; then
    failed=1
    mkdir -p "build-fuzz/crashes/$thing"
    crash=""
    for file in "$work"/artifacts/*; do
      [ -e "$file" ] || continue
      cp "$file" "build-fuzz/crashes/$thing/"
      crash="build-fuzz/crashes/$thing/$(basename "$file")"
    done
    echo "FAIL $thing: exit $status, crash file ${crash:-(none written)}; the fuzzer's last lines:" >&2
    tail -40 "$work/log" >&2
    echo "reproduce: $binary ${crash:-<crash file>}" >&2
  fi
done
exit "$failed"
