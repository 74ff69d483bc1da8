#!/usr/bin/env bash
# Session 41, call 2: the fused feed-forward kernel (kernels/feed_forward.cu).
# Its kernel-harness cases and the encoder parity first, then the chunk step
# fused against unfused (--ffn, same binary, alternating), ncu's per-kernel
# times of one fused step at B = 2048, the whole engine at scale (greedy),
# and the engine tests on the graphed path with the time left. Logs in /tmp/c2,
# back as $OUT/call2.tgz; the summary is stdout.
#   bash tools/gpu/pack.sh .devrun/new (the binaries below, from a CUDA build)   (here)
#   BUDGET=570 OUT=$OUT bash bench/results/gpu/session41/call2.sh                (device call carrying .devrun)
set -u
deadline=$(( $(date +%s) + ${BUDGET:-570} ))
left() { echo $(( deadline - $(date +%s) )); }
O=/tmp/c2; mkdir -p /tmp/nb $O
trap 'tar -czf $OUT/call2.tgz -C $O .' EXIT
tar -xJf .devrun/new/bundle.tar.xz -C /tmp/nb
B=/tmp/nb/bundle; export LD_LIBRARY_PATH=$B/lib; M=models/en-conformer-ctc
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee $O/gpu.txt
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
step() { echo "== $* ($(date +%T), $(left) s left)"; }
fx=$(strings $B/bin/encoder_parity_gpu_test | grep -m1 -E '/tests/encoder/golden$')
mkdir -p "$fx"; python3 -B -m tools.reference.make_fixtures --out "$fx" > $O/fixtures.log 2>&1 || echo "fixtures failed"
step "kernel harness: feed_forward cases"
timeout 60 $B/bin/kernels_backend_ops_gpu_test --gtest_color=no --gtest_filter='*feed_forward*' > $O/ff_cases.log 2>&1
echo "rc $?"; grep -E "^\[  (PASSED|FAILED) |error .* > bound" $O/ff_cases.log | head -12
step "encoder parity"
timeout 90 $B/bin/encoder_parity_gpu_test --gtest_color=no > $O/encoder_parity_gpu_test.log 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" $O/encoder_parity_gpu_test.log | tail -6
grep -E "fused vs separate" $O/encoder_parity_gpu_test.log | sort -t'|' -k2 | tail -4
for k in fused unfused fused unfused; do
  step "oasr-bench-step, feed-forward $k"
  timeout 90 $B/bin/oasr-bench-step --model-dir $M --device cuda --dtype bfloat16 --ffn $k \
    --batches 64,512,2048,8192 --modes graph --reps 10 >> $O/step_$k.txt 2>&1
  grep -E "graph" $O/step_$k.txt | tail -4
done
step "ncu per-kernel times of one fused step at B = 2048"
timeout 90 ncu --clock-control none --nvtx --nvtx-include "timed/" --metrics gpu__time_duration.sum --csv \
  $B/bin/oasr-bench-step --model-dir $M --device cuda --dtype bfloat16 --batches 2048 --reps 1 --modes eager \
  > $O/ncu_step_fused.csv 2> $O/ncu_step_fused.err
python3 tools/gpu/ncu_summary.py $O/ncu_step_fused.csv | tee $O/profile_2048_fused.txt | head -14
if [ "$mem" -gt 120000 ]; then greedy="90000 100000"; else greedy="65000 70000"; fi
for n in $greedy; do
  r=$(left); [ $r -lt 150 ] && { echo "no time for greedy $n"; continue; }
  step "oasr-bench-gpu greedy at $n"
  timeout 90 $B/bin/oasr-bench-gpu --model-dir $M --samples samples --device cuda --warm 4 --run 10 \
    --seconds 20 --front-end device --streams $n --drivers 6 --frontend-threads 2 --decode-threads 6 > $O/greedy_$n.txt 2>&1
  echo "rc $?"; grep -v "^ *$" $O/greedy_$n.txt | tail -6
done
for t in scheduler_engine_graphs scheduler_cohort_graph kernels_backend_ops scheduler_engine; do
  r=$(left); [ $r -lt 40 ] && { echo "no time for $t"; continue; }
  step "${t}_gpu_test"
  timeout $(( r - 15 )) $B/bin/${t}_gpu_test --gtest_color=no > $O/${t}_gpu_test.log 2>&1; echo "rc $?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran|^\[  FAILED  \]" $O/${t}_gpu_test.log | tail -8
  grep -E -A3 "Failure|Check failed" $O/${t}_gpu_test.log | head -12
done
step end
