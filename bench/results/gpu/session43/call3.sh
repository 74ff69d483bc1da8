#!/usr/bin/env bash
# Session 43, call 3 (the session's first to find a machine; device time being
# short): the harness' linear and paged-attention cases (kNorms on both
# sides of the wave; the float8 pool against float64), the chunk step with
# --gemm cublas / norms and --kv-dtype auto / float8_e4m3, then the engine
# at scale, greedy, with the float8 pool: on an H100 (where bfloat16 stopped
# at 70,000 streams for memory) 80,000 and 90,000; on an H200 95,000 and
# 105,000. Logs in /tmp/c3, back as $OUT/call3.tgz; the summary is stdout.
#   bash tools/gpu/pack.sh .devrun/new (the binaries in gpu-scale.md, session 43)   (here)
#   BUDGET=570 OUT=$OUT bash bench/results/gpu/session43/call3.sh
set -u
deadline=$(( $(date +%s) + ${BUDGET:-570} ))
left() { echo $(( deadline - $(date +%s) )); }
O=/tmp/c3; mkdir -p /tmp/nb $O
trap 'tar -czf $OUT/call3.tgz -C $O .' EXIT
[ -d /tmp/nb/bundle ] || tar -xJf .devrun/new/bundle.tar.xz -C /tmp/nb
B=/tmp/nb/bundle; export LD_LIBRARY_PATH=$B/lib; M=models/en-conformer-ctc
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee $O/gpu.txt
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
step() { echo "== $* ($(date +%T), $(left) s left)"; }
step "kernel harness: linear and paged-attention cases"
timeout 120 $B/bin/kernels_backend_ops_gpu_test --gtest_color=no --gtest_filter='*linear*:*paged_attention*' > $O/harness.log 2>&1
echo "rc $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|error .* > bound" $O/harness.log | head -12
for g in "cublas auto" "norms auto" "cublas fp8" "norms fp8"; do
  set -- $g
  r=$(left); [ $r -lt 250 ] && { echo "no time for step $g"; continue; }
  step "oasr-bench-step, products $1, K/V $2"
  timeout 50 $B/bin/oasr-bench-step --model-dir $M --device cuda --dtype bfloat16 --gemm $1 \
    --kv-dtype $2 --batches 512,2048,8192 --modes graph --reps 10 >> $O/step_$1_$2.txt 2>&1
  grep -E "graph" $O/step_$1_$2.txt | tail -3
done
if [ "$mem" -gt 120000 ]; then rows="95000 105000"; else rows="80000 90000"; fi
for n in $rows; do
  r=$(left); [ $r -lt 70 ] && { echo "no time for $n"; continue; }
  step "oasr-bench-gpu greedy, float8 K/V, $n streams"
  timeout $(( r < 110 ? r - 5 : 105 )) $B/bin/oasr-bench-gpu --model-dir $M --samples samples --device cuda --warm 4 \
    --run 10 --seconds 20 --front-end device --streams $n --drivers 6 --frontend-threads 2 \
    --decode-threads 6 --kv-dtype float8_e4m3 > $O/greedy_fp8_$n.txt 2>&1
  echo "rc $?"; grep -v "^ *$" $O/greedy_fp8_$n.txt | tail -6
done
step end
