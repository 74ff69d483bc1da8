#!/usr/bin/env bash
# Session 45, call 2: the new defaults (products `epilogues`, k <= 256
# weight-stationary, both through the staged epilogue). The engine GPU
# tests (graphed and eager), encoder parity, the chunk step against `norms`, the engine at scale (greedy and
# beam 10 with both LMs), then ncu's per-kernel times of one step at
# B = 2,048 and PyTorch eager's step, as time allows. Logs in /tmp/c2, back
# as $OUT/call2.tgz; the summary is stdout.
#   bash tools/gpu/pack.sh .devrun/s45b build-gpu/tests/scheduler/scheduler_engine_graphs_gpu_test \
#     build-gpu/tests/scheduler/scheduler_engine_gpu_test build-gpu/tests/encoder/encoder_parity_gpu_test \
#     build-gpu/bench/oasr-bench-step build-gpu/bench/oasr-bench-gpu   (here)
#   BUDGET=560 OUT=$OUT bash bench/results/gpu/session45/call2.sh
set -u
deadline=$(( $(date +%s) + ${BUDGET:-560} ))
left() { echo $(( deadline - $(date +%s) )); }
O=/tmp/c2; mkdir -p /tmp/nb2 $O
trap 'tar -czf $OUT/call2.tgz -C $O .' EXIT
[ -d /tmp/nb2/bundle ] || tar -xJf .devrun/s45b/bundle.tar.xz -C /tmp/nb2
B=/tmp/nb2/bundle; export LD_LIBRARY_PATH=$B/lib; M=models/en-conformer-ctc
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee $O/gpu.txt
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
step() { echo "== $* ($(date +%T), $(left) s left)"; }
fx=$(strings $B/bin/encoder_parity_gpu_test | grep -m1 -E '/tests/encoder/golden$')
mkdir -p "$fx"; python3 -B -m tools.reference.make_fixtures --out "$fx" > $O/fixtures.log 2>&1 || echo "fixtures failed"
for t in scheduler_engine_graphs:150 scheduler_engine:110 encoder_parity:80; do
  n=${t%:*}; lim=${t#*:}
  step "${n}_gpu_test"
  timeout $lim $B/bin/${n}_gpu_test --gtest_color=no > $O/${n}_gpu_test.log 2>&1; echo "rc $?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran|^\[  FAILED  \]" $O/${n}_gpu_test.log | tail -6
  grep -E -A3 "Failure|Check failed" $O/${n}_gpu_test.log | head -12
done
for g in auto norms; do
  r=$(left); [ $r -lt 150 ] && { echo "no time for step $g"; continue; }
  step "oasr-bench-step, products $g"
  timeout 50 $B/bin/oasr-bench-step --model-dir $M --device cuda --dtype bfloat16 --gemm $g \
    --batches 512,2048,8192 --modes graph --reps 10 > $O/step_$g.txt 2>&1
  grep -E "graph" $O/step_$g.txt | tail -3
done
if [ "$mem" -gt 120000 ]; then rows="greedy:100000 greedy:95000 beam:90000"; kv=auto; else rows="greedy:92000 beam:88000 beam:84000"; kv=float8_e4m3; fi
for sn in $rows; do
  s=${sn%:*}; n=${sn#*:}
  r=$(left); [ $r -lt 60 ] && { echo "no time for $s $n"; continue; }
  step "oasr-bench-gpu $s, defaults, K/V $kv, $n streams"
  if [ $s = greedy ]; then extra="--drivers 6 --decode-threads 6"; else
    extra="--search beam --token-beam 8 --blank-skip 0.999 --drivers 4 --decode-threads 10"; fi
  nvidia-smi --query-gpu=timestamp,utilization.gpu --format=csv,noheader -lms 200 > $O/util_${s}_$n.txt 2>&1 &
  smi=$!
  timeout $(( r < 90 ? r - 5 : 85 )) $B/bin/oasr-bench-gpu --model-dir $M --samples samples --device cuda --warm 4 \
    --run 10 --seconds 20 --front-end device --streams $n --frontend-threads 2 $extra \
    --kv-dtype $kv > $O/${s}_$n.txt 2>&1
  echo "rc $?"; kill $smi 2>/dev/null; grep -v "^ *$" $O/${s}_$n.txt | tail -5
  awk -F', ' '{gsub(/ %/,"",$2); if (NR > 25 && NR <= 75) {s += $2; c++}} END {if (c) printf "NVML utilisation %.1f %% (mean of %d samples, 5-15 s in)\n", s / c, c}' $O/util_${s}_$n.txt
done
r=$(left)
if [ $r -gt 70 ]; then
  step "ncu per-kernel times of one step at B = 2048, defaults"
  timeout $(( r - 10 < 80 ? r - 10 : 80 )) ncu --clock-control none --nvtx --nvtx-include "timed/" \
    --metrics gpu__time_duration.sum --csv $B/bin/oasr-bench-step --model-dir $M --device cuda \
    --dtype bfloat16 --batches 2048 --reps 1 --modes eager > $O/ncu_step.csv 2> $O/ncu_step.err
  python3 tools/gpu/ncu_summary.py $O/ncu_step.csv | tee $O/profile_2048.txt | head -24
fi
r=$(left)
if [ $r -gt 50 ]; then
  step "PyTorch eager step"
  timeout $(( r - 5 )) python3 bench/gpu/torch_step.py --model-dir $M --modes eager --batches 512,2048,8192 2>&1 | grep -v Warning | tee $O/torch_step.txt
fi
step end
