#!/usr/bin/env bash
# Session 45, call 4: the engine GPU tests (graphed, then eager) with the
# staged rows leaving by bulk copies now the default, then the engine at
# 92,000 greedy streams. Logs in /tmp/c4, back as $OUT/call4.tgz.
#   bash tools/gpu/pack.sh .devrun/s45d build-gpu/tests/scheduler/scheduler_engine_graphs_gpu_test \
#     build-gpu/tests/scheduler/scheduler_engine_gpu_test build-gpu/bench/oasr-bench-gpu   (here)
#   BUDGET=330 OUT=$OUT bash bench/results/gpu/session45/call4.sh
set -u
deadline=$(( $(date +%s) + ${BUDGET:-330} ))
left() { echo $(( deadline - $(date +%s) )); }
O=/tmp/c4; mkdir -p /tmp/nb4 $O
trap 'tar -czf $OUT/call4.tgz -C $O .' EXIT
[ -d /tmp/nb4/bundle ] || tar -xJf .devrun/s45d/bundle.tar.xz -C /tmp/nb4
B=/tmp/nb4/bundle; export LD_LIBRARY_PATH=$B/lib; M=models/en-conformer-ctc
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $O/gpu.txt
step() { echo "== $* ($(date +%T), $(left) s left)"; }
fx=$(strings $B/bin/scheduler_engine_gpu_test | grep -m1 -E '/tests/encoder/golden$')
if [ -n "$fx" ]; then mkdir -p "$fx"; python3 -B -m tools.reference.make_fixtures --out "$fx" > $O/fixtures.log 2>&1 || echo "fixtures failed"; fi
for t in scheduler_engine_graphs:130 scheduler_engine:110; do
  n=${t%:*}; lim=${t#*:}
  r=$(left); [ $r -lt 60 ] && { echo "no time for $n"; continue; }
  step "${n}_gpu_test"
  timeout $(( r - 10 < lim ? r - 10 : lim )) $B/bin/${n}_gpu_test --gtest_color=no > $O/${n}_gpu_test.log 2>&1; echo "rc $?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran|^\[  FAILED  \]" $O/${n}_gpu_test.log | tail -6
  grep -E -A3 "Failure|Check failed" $O/${n}_gpu_test.log | head -12
done
r=$(left)
if [ $r -gt 50 ]; then
  step "oasr-bench-gpu greedy, defaults, 92000 streams"
  timeout $(( r < 80 ? r - 5 : 75 )) $B/bin/oasr-bench-gpu --model-dir $M --samples samples --device cuda --warm 4 \
    --run 10 --seconds 20 --front-end device --streams 92000 --drivers 6 --frontend-threads 2 \
    --decode-threads 6 --kv-dtype float8_e4m3 > $O/greedy_92000.txt 2>&1
  echo "rc $?"; grep -v "^ *$" $O/greedy_92000.txt | tail -5
fi
step end
