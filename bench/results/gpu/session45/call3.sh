#!/usr/bin/env bash
# Session 45, call 3: the staged rows leaving by bulk asynchronous copies
# (OASR_WGMMA_BULK_STORE=1) against the warp's 16-byte stores: the
# harness' linear cases and encoder parity with it on, oasr-bench-gemm and
# the chunk step both ways, then the engine both ways. Logs in /tmp/c3,
# back as $OUT/call3.tgz; the summary is stdout.
#   bash tools/gpu/pack.sh .devrun/s45c build-gpu/tests/kernels/kernels_backend_ops_gpu_test \
#     build-gpu/bench/oasr-bench-gemm build-gpu/tests/encoder/encoder_parity_gpu_test \
#     build-gpu/bench/oasr-bench-step build-gpu/bench/oasr-bench-gpu          (here)
#   BUDGET=420 OUT=$OUT bash bench/results/gpu/session45/call3.sh
set -u
deadline=$(( $(date +%s) + ${BUDGET:-420} ))
left() { echo $(( deadline - $(date +%s) )); }
O=/tmp/c3; mkdir -p /tmp/nb3 $O
trap 'tar -czf $OUT/call3.tgz -C $O .' EXIT
[ -d /tmp/nb3/bundle ] || tar -xJf .devrun/s45c/bundle.tar.xz -C /tmp/nb3
B=/tmp/nb3/bundle; export LD_LIBRARY_PATH=$B/lib; M=models/en-conformer-ctc
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee $O/gpu.txt
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
step() { echo "== $* ($(date +%T), $(left) s left)"; }
for st in 1 0; do
  step "kernel harness: linear cases, bulk stores, OASR_WGMMA_STATIONARY=$st"
  OASR_WGMMA_BULK_STORE=1 OASR_WGMMA_STATIONARY=$st timeout 80 $B/bin/kernels_backend_ops_gpu_test --gtest_color=no --gtest_filter='*linear*' > $O/harness_bulk_$st.log 2>&1
  echo "rc $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|error .* > bound" $O/harness_bulk_$st.log | head -12
done
fx=$(strings $B/bin/encoder_parity_gpu_test | grep -m1 -E '/tests/encoder/golden$')
mkdir -p "$fx"; python3 -B -m tools.reference.make_fixtures --out "$fx" > $O/fixtures.log 2>&1 || echo "fixtures failed"
step "encoder parity, bulk stores"
OASR_WGMMA_BULK_STORE=1 timeout 80 $B/bin/encoder_parity_gpu_test --gtest_color=no > $O/parity_bulk.log 2>&1
echo "rc $?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" $O/parity_bulk.log | head -12
for bs in 0 1; do
  step "oasr-bench-gemm, OASR_WGMMA_BULK_STORE=$bs"
  OASR_WGMMA_BULK_STORE=$bs timeout 45 $B/bin/oasr-bench-gemm --rows 32768 --reps 10 --sets 2 > $O/gemm_bulk_$bs.txt 2>&1
  echo "rc $?"; grep -E "ffn|qkv|attn|conv1" $O/gemm_bulk_$bs.txt
done
for bs in 0 1 0 1; do
  step "oasr-bench-step, defaults, OASR_WGMMA_BULK_STORE=$bs"
  OASR_WGMMA_BULK_STORE=$bs timeout 40 $B/bin/oasr-bench-step --model-dir $M --device cuda --dtype bfloat16 \
    --batches 2048,8192 --modes graph --reps 10 >> $O/step_bulk_$bs.txt 2>&1
  grep -E "graph" $O/step_bulk_$bs.txt | tail -2
done
if [ "$mem" -gt 120000 ]; then n=100000; kv=auto; else n=92000; kv=float8_e4m3; fi
for bs in 1 0; do
  r=$(left); [ $r -lt 50 ] && { echo "no time for the engine, bulk $bs"; continue; }
  step "oasr-bench-gpu greedy, defaults, OASR_WGMMA_BULK_STORE=$bs, $n streams"
  OASR_WGMMA_BULK_STORE=$bs timeout $(( r < 80 ? r - 5 : 75 )) $B/bin/oasr-bench-gpu --model-dir $M --samples samples --device cuda --warm 4 \
    --run 10 --seconds 20 --front-end device --streams $n --drivers 6 --frontend-threads 2 \
    --decode-threads 6 --kv-dtype $kv > $O/greedy_${n}_bulk_$bs.txt 2>&1
  echo "rc $?"; grep -v "^ *$" $O/greedy_${n}_bulk_$bs.txt | tail -5
done
step end
