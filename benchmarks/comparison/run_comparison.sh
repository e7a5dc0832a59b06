#!/usr/bin/env bash
# Disaggregated vs colocated at equal cores (2): goodput search per deployment on one workload.
#   benchmarks/comparison/run_comparison.sh MODEL_DIR WORKLOAD SLO_TTFT_MS SLO_TPOT_MS [EXTRA bench flags]
# Deployments: 1 prefill + 1 decode worker (1 thread each); 2 colocated workers (1 thread each);
# 1 colocated worker with 2 threads; the last two also with chunked prefill (512-token budget).
# With FAULT set (a `baton bench --fault` spec, e.g. FAULT=decode:kill:20s), each deployment is
# searched again under that fault right after its fault-free search, as <deployment>+faults.
# Results go to $RESULTS_ROOT/<model>/<workload>/<deployment>/ (goodput.json + per-run JSONL);
# RESULTS_ROOT defaults to benchmarks/results/<machine> (e.g. zen4, zen3: figures from different
# CPUs are not comparable, so each machine keeps its own tree).
set -euo pipefail
cd "$(dirname "$0")/../.."
BATON=${BATON_BUILD_DIR:-build}/bin/baton
model=$(realpath "$1"); workload=$2; ttft=$3; tpot=$4; shift 4
out=${RESULTS_ROOT:-benchmarks/results/$(benchmarks/comparison/machine_tag.sh)}/$(basename "$model")/$workload
mkdir -p "$out"
port=52100

deployment() {  # name -> YAML
  case $1 in
    disagg-1p1d) printf 'prefill: {instances: 1, threads: 1}\ndecode: {instances: 1, threads: 1}\n' ;;
    coloc-2x1) printf 'mode: colocated\ncolocated: {instances: 2, threads: 1}\n' ;;
    coloc-1x2) printf 'mode: colocated\ncolocated: {instances: 1, threads: 2}\n' ;;
    coloc-2x1-chunked) printf 'mode: colocated\ncolocated: {instances: 2, threads: 1, chunked_prefill: true, max_num_batched_tokens: 512}\n' ;;
    coloc-1x2-chunked) printf 'mode: colocated\ncolocated: {instances: 1, threads: 2, chunked_prefill: true, max_num_batched_tokens: 512}\n' ;;
  esac
}

for name in ${DEPLOYMENTS:-disagg-1p1d coloc-2x1 coloc-1x2 coloc-2x1-chunked coloc-1x2-chunked}; do
  config=$(mktemp --suffix=.yaml)
  { printf 'model: %s\nscheduler_port: %d\nhttp_port: 0\ninternal_port: %d\n' "$model" "$port" $((port + 9))
    deployment "$name"; } > "$config"
  secret=$(mktemp)  # mode 0600: what `baton serve --secret-file` demands
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$secret"
  log=$(mktemp)
  "$BATON" serve --config "$config" --secret-file "$secret" > "$log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 100); do grep -q "^baton: serving" "$log" && break; sleep 0.2; done
  search() {  # label, extra flags
    local label=$1; shift
    "$BATON" bench goodput --server "127.0.0.1:$port" --model "$model" --workload "$workload" \
      --slo-ttft "$ttft" --slo-tpot "$tpot" --label "$label" --no-progress \
      --output-dir "$out/$label" "$@" || echo "bench failed for $label" >&2
  }
  search "$name" "$@"
  if [[ -n ${FAULT:-} ]]; then
    search "$name+faults" --fault "$FAULT" --fault-registry "127.0.0.1:$((port + 9))" \
      --secret-file "$secret" "$@"
  fi
  kill -TERM "$serve_pid"; wait "$serve_pid" || true
  rm -f "$config" "$log" "$secret"
  port=$((port + 10))
done
