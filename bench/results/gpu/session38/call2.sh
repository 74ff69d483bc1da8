#!/usr/bin/env bash
# Second call: scale at 75,000/85,000, the stem, the graphs test (time-capped).
set -u
mkdir -p /tmp/nb && tar -xJf .devrun/new/bundle.tar.xz -C /tmp/nb
B=/tmp/nb/bundle; export LD_LIBRARY_PATH=$B/lib; M=models/en-conformer-ctc
echo "== scale $(date +%T)"
timeout 215 $B/bin/oasr-bench-gpu --model-dir $M --samples samples --device cuda --warm 4 --run 10 --seconds 20 \
  --front-end device --streams 75000,85000 --drivers 6 --frontend-threads 2 --decode-threads 6 > $OUT/scale.txt 2>&1 &
p=$!; sleep 3
python3 tools/gpu/thread_cpu.py --interval 4 --count 50 $p > $OUT/scale_threads.txt 2>&1 &
wait $p; echo "scale rc $?"; grep -v "^ *$" $OUT/scale.txt | tail -14
echo "== stem $(date +%T)"
timeout 45 $B/bin/oasr-bench-stem > $OUT/stem.txt 2>&1; echo "stem rc $?"; tail -14 $OUT/stem.txt
for k in recompute tensor-cores; do
  echo "== step --stem $k $(date +%T)"
  timeout 40 $B/bin/oasr-bench-step --model-dir $M --device cuda --dtype bfloat16 --batches 2048,8192 --modes graph --stem $k > $OUT/step_$k.txt 2>&1
  echo "rc $?"; grep -E "graph|stem" $OUT/step_$k.txt | tail -4
done
echo "== graphs test $(date +%T)"
fx=$(strings $B/bin/scheduler_engine_graphs_gpu_test | grep -m1 -E '/tests/encoder/golden$')
python3 -B -m tools.reference.make_fixtures --out "$fx" > $OUT/fixtures.log 2>&1
timeout 110 $B/bin/scheduler_engine_graphs_gpu_test --gtest_color=no > $OUT/graphs_test.log 2>&1; echo "graphs rc $?"
grep -E "^\[  (PASSED|FAILED) |^\[       OK|Failure" $OUT/graphs_test.log | tail -60 | cut -c1-160
echo "== end $(date +%T)"
