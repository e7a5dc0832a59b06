#!/bin/bash
# Run from anywhere: the configs and outputs live next to this script.
cd "$(dirname "$0")"
ROOT=../../../../..
B=$ROOT/build/bin/baton
for round in 1 2; do for n in recompute swap; do
  $B serve --config $n.yaml > serve-$n-$round.log 2>&1 &
  pid=$!
  for i in $(seq 1 120); do grep -q "^baton: serving" serve-$n-$round.log && break; sleep 0.5; done
  $B bench --server 127.0.0.1:52600 --model $ROOT/build/models/tiny --workload chatbot --rate ${RATE:-2} --num-requests 100 --seed 1 --slo-ttft 455 --slo-tpot 15.5 --no-progress --output bench-$n-$round.jsonl > bench-$n-$round.txt 2>&1
  kill -TERM $pid; wait $pid
  echo "$n round $round: $(grep -E '^SLO attainment' bench-$n-$round.txt)"
done; done
