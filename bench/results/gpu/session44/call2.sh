#!/usr/bin/env bash
# Session 44, call 2: the engine GPU tests (graphed and eager) on this
# build's defaults (cohorts filling a captured width among them), ncu's
# per-kernel times of one chunk step at B = 2,048 with --gemm $GEMM, then
# the engine at scale, greedy and beam 10 with both LMs, with $GEMM. Logs in
# /tmp/c2, back as $OUT/call2.tgz; the summary is stdout.
#   bash tools/gpu/pack.sh .devrun/c2 build-gpu/tests/scheduler/scheduler_engine_graphs_gpu_test \
#     build-gpu/tests/scheduler/scheduler_engine_gpu_test build-gpu/bench/oasr-bench-step \
#     build-gpu/bench/oasr-bench-gpu                                              (here)
#   GEMM=epilogues BUDGET=570 OUT=$OUT bash bench/results/gpu/session44/call2.sh
set -u
deadline=$(( $(date +%s) + ${BUDGET:-570} ))
left() { echo $(( deadline - $(date +%s) )); }
G=${GEMM:-auto}
O=/tmp/c2; mkdir -p /tmp/nb2 $O
trap 'tar -czf $OUT/call2.tgz -C $O .' EXIT
[ -d /tmp/nb2/bundle ] || tar -xJf .devrun/c2/bundle.tar.xz -C /tmp/nb2
B=/tmp/nb2/bundle; export LD_LIBRARY_PATH=$B/lib; M=models/en-conformer-ctc
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee $O/gpu.txt
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
step() { echo "== $* ($(date +%T), $(left) s left)"; }
fx=$(strings $B/bin/scheduler_engine_gpu_test | grep -m1 -E '/tests/encoder/golden$')
mkdir -p "$fx"; python3 -B -m tools.reference.make_fixtures --out "$fx" > $O/fixtures.log 2>&1 || echo "fixtures failed"
for t in scheduler_engine_graphs scheduler_engine; do
  r=$(left); [ $r -lt 200 ] && { echo "no time for $t"; continue; }
  step "${t}_gpu_test"
  timeout 150 $B/bin/${t}_gpu_test --gtest_color=no > $O/${t}_gpu_test.log 2>&1; echo "rc $?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran|^\[  FAILED  \]" $O/${t}_gpu_test.log | tail -6
  grep -E -A3 "Failure|Check failed" $O/${t}_gpu_test.log | head -12
done
r=$(left)
if [ $r -gt 150 ]; then
  step "ncu per-kernel times of one step at B = 2048, --gemm $G"
  timeout 90 ncu --clock-control none --nvtx --nvtx-include "timed/" \
    --metrics gpu__time_duration.sum --csv $B/bin/oasr-bench-step --model-dir $M --device cuda \
    --dtype bfloat16 --gemm $G --batches 2048 --reps 1 --modes eager > $O/ncu_step.csv 2> $O/ncu_step.err
  python3 tools/gpu/ncu_summary.py $O/ncu_step.csv | tee $O/profile_2048.txt | head -16
fi
if [ "$mem" -gt 120000 ]; then rows="greedy:90000 greedy:100000 beam:80000"; kv=auto; else rows="greedy:84000 beam:80000"; kv=float8_e4m3; fi
for sn in $rows; do
  s=${sn%:*}; n=${sn#*:}
  r=$(left); [ $r -lt 80 ] && { echo "no time for $s $n"; continue; }
  step "oasr-bench-gpu $s, --gemm $G, K/V $kv, $n streams"
  if [ $s = greedy ]; then extra="--drivers 6 --decode-threads 6"; else
    extra="--search beam --token-beam 8 --blank-skip 0.999 --drivers 4 --decode-threads 10"; fi
  nvidia-smi --query-gpu=timestamp,utilization.gpu --format=csv,noheader -lms 200 > $O/util_${s}_$n.txt 2>&1 &
  smi=$!
  timeout $(( r < 110 ? r - 5 : 105 )) $B/bin/oasr-bench-gpu --model-dir $M --samples samples --device cuda --warm 4 \
    --run 10 --seconds 20 --front-end device --streams $n --frontend-threads 2 $extra \
    --kv-dtype $kv --gemm $G > $O/${s}_$n.txt 2>&1
  echo "rc $?"; kill $smi 2>/dev/null; grep -v "^ *$" $O/${s}_$n.txt | tail -6
  awk -F', ' '{gsub(/ %/,"",$2); if (NR > 25 && NR <= 75) {s += $2; c++}} END {if (c) printf "NVML utilisation %.1f %% (mean of %d samples, 5-15 s in)\n", s / c, c}' $O/util_${s}_$n.txt
done
step end
