#!/usr/bin/env bash
# Session 47, call 2: the implicit-GEMM stem as the default (this build):
# the scheduler's GPU tests (graph replay equals eager, batching invariance,
# the engine on the graphed path, the GPU decoders) on it, then
# oasr-bench-gpu greedy at 92,000 and 96,000 streams (float8 K/V, session
# 45's settings) to see whether the shorter step moves the H100 box's limit.
# Logs in /tmp/c2, back as $OUT/call2.tgz; the summary is stdout.
#   bash tools/gpu/pack.sh .devrun/s47b build-gpu/tests/scheduler/scheduler_{cohort_graph,engine_graphs,engine,cohort_decode}_gpu_test \
#     build-gpu/bench/oasr-bench-gpu build-gpu/bench/oasr-bench-step     (here, OASR_WITH_OPENBLAS=OFF)
#   BUDGET=330 OUT=$OUT bash bench/results/gpu/session47/call2.sh
set -u
deadline=$(( $(date +%s) + ${BUDGET:-330} ))
left() { echo $(( deadline - $(date +%s) )); }
O=/tmp/c2; mkdir -p /tmp/nb2 $O
trap 'tar -czf $OUT/call2.tgz -C $O .' EXIT
[ -d /tmp/nb2/bundle ] || tar -xJf .devrun/s47b/bundle.tar.xz -C /tmp/nb2
B=/tmp/nb2/bundle; export LD_LIBRARY_PATH=$B/lib; M=models/en-conformer-ctc
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee $O/gpu.txt
step() { echo "== $* ($(date +%T), $(left) s left)"; }
for t in cohort_graph engine_graphs engine cohort_decode; do
  step "scheduler_${t}_gpu_test"
  timeout 60 $B/bin/scheduler_${t}_gpu_test --gtest_color=no > $O/$t.log 2>&1
  echo "rc $?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]" $O/$t.log | head -8
done
for n in 92000 96000; do
  r=$(left); [ $r -lt 60 ] && { echo "no time for $n"; continue; }
  step "oasr-bench-gpu greedy, defaults (implicit-gemm stem), K/V float8_e4m3, $n streams"
  timeout $(( r < 90 ? r - 5 : 85 )) $B/bin/oasr-bench-gpu --model-dir $M --samples samples --device cuda \
    --warm 4 --run 10 --seconds 20 --front-end device --streams $n --frontend-threads 2 \
    --drivers 6 --decode-threads 6 --kv-dtype float8_e4m3 > $O/greedy_$n.txt 2>&1
  echo "rc $?"; grep -v "^ *$" $O/greedy_$n.txt | tail -6
done
step end
