#!/usr/bin/env bash
# Session 40, call 1 (any H100/H200): the chunk step with the double-buffered,
# row-coalesced attention kernel against the previous kernels library (A/B in
# the same call), every GPU test of the bundle (the tensor-core stem now the
# default), then the whole engine at scale with the time left (greedy; 85,000
# streams on an H200, 60,000 on an 80 GB H100), time-capped. The filterbank
# with the mel spans given against each block's scan (oasr-bench-logmel).
set -u
deadline=$(( $(date +%s) + ${BUDGET:-570} ))
left() { echo $(( deadline - $(date +%s) )); }
mkdir -p /tmp/nb && tar -xJf .devrun/new/bundle.tar.xz -C /tmp/nb
mkdir -p /tmp/base && xz -dc .devrun/base/liboasr_kernels.so.xz > /tmp/base/liboasr_kernels.so
B=/tmp/nb/bundle; export LD_LIBRARY_PATH=$B/lib; M=models/en-conformer-ctc
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee $OUT/gpu.txt
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
step() { echo "== $* ($(date +%T), $(left) s left)"; }
for k in new base new base; do
  step "oasr-bench-step, kernels $k"
  if [ $k = base ]; then L=/tmp/base:$B/lib; else L=$B/lib; fi
  LD_LIBRARY_PATH=$L timeout 60 $B/bin/oasr-bench-step --model-dir $M --device cuda --dtype bfloat16 \
    --batches 512,2048,8192 --modes graph --reps 10 >> $OUT/step_$k.txt 2>&1
  grep -E "graph" $OUT/step_$k.txt | tail -3
done
step "oasr-bench-logmel (mel spans given / scanned by each block)"
timeout 40 $B/bin/oasr-bench-logmel --device cuda --batches 8192,32768 > $OUT/logmel.txt 2>&1; head -5 $OUT/logmel.txt
fx=$(strings $B/bin/scheduler_engine_gpu_test | grep -m1 -E '/tests/encoder/golden$')
mkdir -p "$fx"; python3 -B -m tools.reference.make_fixtures --out "$fx" > $OUT/fixtures.log 2>&1 || echo "fixtures failed"
for t in kernels_backend_ops scheduler_engine_graphs encoder_parity scheduler_engine scheduler_cohort_graph \
         scheduler_cohort_decode kernels encoder_log_mel cache; do
  r=$(left); [ $r -lt 150 ] && { echo "no time for $t"; continue; }
  step "${t}_gpu_test"
  timeout $(( r - 140 )) $B/bin/${t}_gpu_test --gtest_color=no > $OUT/${t}_gpu_test.log 2>&1; echo "rc $?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran|^\[  FAILED  \]" $OUT/${t}_gpu_test.log | tail -8
  grep -E -A3 "Failure|Check failed" $OUT/${t}_gpu_test.log | head -12
done
if [ "$mem" -gt 120000 ]; then n=85000; else n=60000; fi
r=$(left)
if [ $r -gt 60 ]; then
  step "oasr-bench-gpu greedy at $n"
  timeout $(( r - 5 )) $B/bin/oasr-bench-gpu --model-dir $M --samples samples --device cuda --warm 4 --run 10 \
    --seconds 20 --front-end device --streams $n --drivers 6 --frontend-threads 2 --decode-threads 6 > $OUT/greedy_$n.txt 2>&1
  echo "rc $?"; grep -v "^ *$" $OUT/greedy_$n.txt | tail -12
fi
step end
